/** Why token ids cannot be used with a model, or undefined: llama.cpp aborts the process on an id outside the vocabulary. */
export function outOfVocabulary(tokens: readonly number[], vocabularySize: number | undefined): string | undefined {
    const bad = tokens.find((token) => token < 0 || (vocabularySize !== undefined && token >= vocabularySize));
    return bad === undefined ? undefined : `token ${bad} is not in the model's vocabulary of ${vocabularySize} tokens`;
}
