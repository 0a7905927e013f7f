/**
 * The default thread count follows the model's size (protocol/engineOptions.ts defaultThreads): all math cores, as
 * llama.cpp's own default, for a model of at least 50 M parameters; half of them for a smaller one (the demo models,
 * stories260K), whose short steps lose to thread hand-offs. The engine passes the GGUF's parameter count.
 */
import assert from "node:assert/strict";
import {test} from "node:test";
import {validateModelFile} from "../../engine/model/validateModel.js";
import {defaultThreads, smallModelParameters} from "../../protocol/engineOptions.js";
import {skipReason} from "../helpers/prerequisites.js";
import {findStoriesModel} from "../helpers/sharedModels.js";

const stories = findStoriesModel();

test("a model of 50 M parameters or more gets every math core; a smaller one half of them, at least one", () => {
    for (const cores of [1, 2, 3, 8, 64])
        assert.equal(defaultThreads(cores, smallModelParameters), cores, `${cores} cores, a 50 M model`);
    assert.equal(defaultThreads(2, 7_000_000_000), 2);
    assert.equal(defaultThreads(2, smallModelParameters - 1), 1);
    assert.equal(defaultThreads(8, 20_000_000), 4);
    assert.equal(defaultThreads(1, 20_000_000), 1);
    assert.equal(defaultThreads(0, 7_000_000_000), 1, "no core count read: one thread");
});

test("an unknown size gets the small-model rule (the host, before the engine has read the model)", () => {
    assert.equal(defaultThreads(2), 1);
    assert.equal(defaultThreads(16), 8);
});

const storiesTest = "stories260K counts as a small model";
test(storiesTest, {skip: skipReason(storiesTest, stories.missing === undefined ? [] : [stories.missing])}, async () => {
    const info = await validateModelFile(stories.path!);
    assert.ok(info.parameterCount > 200_000 && info.parameterCount < smallModelParameters, `${info.parameterCount} parameters`);
    assert.equal(defaultThreads(2, info.parameterCount), 1);
});
