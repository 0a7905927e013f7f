import type {RawData} from "ws";

/** A WebSocket message's payload (ws's RawData: a Buffer, an ArrayBuffer or Buffer fragments) as UTF-8 text. */
export function rawDataToString(data: RawData): string {
    if (Array.isArray(data))
        return Buffer.concat(data).toString("utf8");
    if (data instanceof ArrayBuffer)
        return Buffer.from(data).toString("utf8");
    return data.toString("utf8");
}
