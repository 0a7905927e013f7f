import type {EngineClient} from "../engineClient/engineClient.js";
import type {StatsManager} from "./statsManager.js";

/**
 * Feeds a StatsManager from an EngineClient's events; returns the function that detaches it.
 * Attaching to a client that is already running first tells the manager its current info and state.
 */
export function attachToEngineClient(manager: StatsManager, client: EngineClient): () => void {
    const info = client.info;
    if (info !== undefined && client.state === "ready")
        manager.onEngineReady(info);
    manager.onEngineState(client.state);

    const onRequest: Parameters<typeof client.on<"request">>[1] = (event) => manager.onRequestEvent(event);
    const onStep: Parameters<typeof client.on<"step">>[1] = (step) => manager.onStep(step);
    const onStats: Parameters<typeof client.on<"stats">>[1] = (snapshot) => manager.onStatsSnapshot(snapshot);
    const onState: Parameters<typeof client.on<"state">>[1] = (state) => manager.onEngineState(state);
    const onReady: Parameters<typeof client.on<"ready">>[1] = (engineInfo) => manager.onEngineReady(engineInfo);
    const onRejected: Parameters<typeof client.on<"rejected">>[1] = (message) => manager.onRejected(message);
    const onExit: Parameters<typeof client.on<"exit">>[1] = (exit) => manager.onEngineExit(exit);

    client.on("request", onRequest);
    client.on("step", onStep);
    client.on("stats", onStats);
    client.on("state", onState);
    client.on("ready", onReady);
    client.on("rejected", onRejected);
    client.on("exit", onExit);
    return () => {
        client.off("request", onRequest);
        client.off("step", onStep);
        client.off("stats", onStats);
        client.off("state", onState);
        client.off("ready", onReady);
        client.off("rejected", onRejected);
        client.off("exit", onExit);
    };
}
