import assert from "node:assert/strict";
import OpenAI from "openai";

/** What the official `openai` client reports of a refused request; fails the test when the request succeeds. */
export async function openaiErrorOf(request: Promise<unknown>): Promise<{status: number, param: string | null | undefined, message: string}> {
    try {
        await request;
    } catch (error) {
        if (error instanceof OpenAI.APIError)
            return {status: Number(error.status ?? 0), param: error.param as string | null | undefined, message: error.message};
        throw error;
    }
    assert.fail("the request was not refused");
}

/** The status and the field a refusal names (for `deepEqual` against what a test expects). */
export async function openaiRefusalOf(request: Promise<unknown>): Promise<{status: number, param: string | null | undefined}> {
    const {status, param} = await openaiErrorOf(request);
    return {status, param};
}
