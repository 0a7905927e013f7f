/** The message of anything thrown: an Error's `message`, otherwise its string form. */
export function errorMessage(error: unknown): string {
    if (error instanceof Error)
        return error.message;
    return String(error);
}
