import {errorMessage} from "../common/errorMessage.js";
import {PortInUseError} from "../extension/host/net/listen.js";

/** Why a server set by a port flag did not start; a port in use also names the flag to change and what 0 means for it. */
export function serverStartFailure(error: unknown, flag: string, zeroMeans: string): string {
    return error instanceof PortInUseError ? `${error.message} (pick another ${flag}, or 0 for ${zeroMeans})` : errorMessage(error);
}
