// @ts-check
// ESLint flat config (ESLint 10, typescript-eslint 8, type-aware).
//
// Style: node-llama-cpp's (its eslint.config.js) as this code already writes it: 4-space indent, double
// quotes, semicolons, no spaces inside braces, no dangling commas, commas between type members,
// `.js` on relative imports, lines up to 140. Correctness: eslint:recommended plus typescript-eslint's
// recommended-type-checked set (floating/misused promises, unsafe any, ...).
// Rules that would only restyle working code (curly, import order, camelcase for vLLM's snake_case
// JSON keys, ...) are left off on purpose.
import js from "@eslint/js";
import stylistic from "@stylistic/eslint-plugin";
import {defineConfig, globalIgnores} from "eslint/config";
import importX from "eslint-plugin-import-x";
import n from "eslint-plugin-n";
import globals from "globals";
import tseslint from "typescript-eslint";

export default defineConfig(
    globalIgnores(["dist/", "dist-bench/", "**/*.vsix", "test/e2e/artifacts/", ".cache/"]),
    {
        files: ["**/*.{ts,mts,cts,js,mjs,cjs}"],
        extends: [
            js.configs.recommended,
            tseslint.configs.recommendedTypeChecked
        ],
        plugins: {
            "@stylistic": stylistic,
            "import-x": importX,
            n
        },
        languageOptions: {
            ecmaVersion: 2023,
            sourceType: "module",
            globals: {...globals.node},
            parserOptions: {
                projectService: true,
                tsconfigRootDir: import.meta.dirname
            }
        },
        linterOptions: {
            reportUnusedDisableDirectives: "error"
        },
        rules: {
            // --- layout ---
            "@stylistic/indent": ["error", 4, {
                SwitchCase: 1,
                FunctionDeclaration: {parameters: "first"}
            }],
            "@stylistic/quotes": ["error", "double", {avoidEscape: true}],
            "@stylistic/quote-props": ["error", "consistent-as-needed"],
            "@stylistic/semi": ["error", "always"],
            "@stylistic/semi-spacing": "error",
            "@stylistic/no-extra-semi": "error",
            // Deprecated in @stylistic 6 in favour of list-style, which would also re-wrap every multi-line
            // object/argument list: kept for the spacing alone (prints one deprecation line per run).
            "@stylistic/object-curly-spacing": ["error", "never"],
            "@stylistic/comma-dangle": ["error", "never"],
            "@stylistic/comma-spacing": ["error", {before: false, after: true}],
            "@stylistic/comma-style": ["error", "last"],
            "@stylistic/member-delimiter-style": ["error", {
                multiline: {delimiter: "comma", requireLast: false},
                singleline: {delimiter: "comma", requireLast: false},
                multilineDetection: "brackets"
            }],
            "@stylistic/type-annotation-spacing": "error",
            "@stylistic/brace-style": ["error", "1tbs", {allowSingleLine: true}],
            "@stylistic/block-spacing": ["error", "never"],
            "@stylistic/padded-blocks": ["error", "never"],
            "@stylistic/keyword-spacing": "error",
            "@stylistic/space-infix-ops": "error",
            "@stylistic/space-unary-ops": "error",
            "@stylistic/space-before-blocks": "error",
            "@stylistic/space-before-function-paren": ["error", {anonymous: "never", named: "never", asyncArrow: "always"}],
            "@stylistic/space-in-parens": ["error", "never"],
            "@stylistic/computed-property-spacing": "error",
            "@stylistic/template-curly-spacing": "error",
            "@stylistic/rest-spread-spacing": "error",
            "@stylistic/arrow-parens": ["error", "always"],
            "@stylistic/arrow-spacing": "error",
            "@stylistic/key-spacing": "error",
            "@stylistic/new-parens": "error",
            "@stylistic/dot-location": ["error", "property"],
            "@stylistic/lines-between-class-members": ["error", {
                enforce: [
                    {blankLine: "always", prev: "method", next: "*"},
                    {blankLine: "always", prev: "*", next: "method"}
                ]
            }],
            "@stylistic/no-multiple-empty-lines": ["error", {max: 2}],
            "@stylistic/no-trailing-spaces": "error",
            "@stylistic/no-multi-spaces": ["error", {ignoreEOLComments: true}],
            "@stylistic/spaced-comment": ["error", "always", {markers: ["/"]}],
            "@stylistic/eol-last": ["error", "always"],
            "@stylistic/max-len": ["error", {
                code: 140,
                tabWidth: 4,
                ignoreStrings: true,
                ignoreTemplateLiterals: true,
                ignoreRegExpLiterals: true,
                ignoreUrls: true
            }],

            // --- imports ---
            // Relative imports carry the emitted extension (`./x.js` for x.ts); autofixable.
            "n/file-extension-in-import": ["error", "always"],
            // One import statement per module; `import type` from the same module stays allowed.
            "import-x/no-duplicates": "error",
            "import-x/first": "error",
            "import-x/newline-after-import": "error",
            "import-x/no-self-import": "error",

            // --- correctness ---
            "no-var": "error",
            // `let x; onEvent(() => x?.y()); x = create();`: a forward reference, not a missed const.
            "prefer-const": ["error", {ignoreReadBeforeAssign: true}],
            "@typescript-eslint/no-unused-vars": ["error", {
                args: "none",
                ignoreRestSiblings: true,
                caughtErrors: "none",
                varsIgnorePattern: "^_"
            }],
            "eqeqeq": ["error", "always", {null: "ignore"}],
            "no-empty": ["error", {allowEmptyCatch: true}],
            "array-callback-return": "error",
            "no-eval": "error",
            "yoda": ["error", "never", {exceptRange: true}]
        }
    },
    {
        files: ["**/*.{ts,mts,cts}"],
        rules: {
            // node:test's describe()/it() return promises the runner itself tracks.
            "@typescript-eslint/no-floating-promises": ["error", {
                allowForKnownSafeCalls: [{from: "package", package: "node:test", name: ["describe", "it", "suite", "test"]}]
            }],
            // Only where a missing `await` changes which errors a try/catch sees; `return await` elsewhere is fine.
            "@typescript-eslint/return-await": ["error", "error-handling-correctness-only"],
            // tsconfig has no noUncheckedIndexedAccess, so every `arr[i]!` would count as unnecessary, yet
            // the code is written for that flag (it fails only ~20 places with it on): leave the `!`s alone.
            "@typescript-eslint/no-unnecessary-type-assertion": "off"
        }
    },
    {
        // Plain JS (scripts/*.mjs, bin/) is outside tsconfig: no type information there.
        files: ["**/*.{js,mjs,cjs}"],
        extends: [tseslint.configs.disableTypeChecked]
    },
    {
        files: ["bin/**/*.js", "**/*.cjs", "test/e2e/fixtures/**/*.js"],
        languageOptions: {sourceType: "commonjs", globals: {...globals.node}},
        rules: {
            "@typescript-eslint/no-require-imports": "off"
        }
    },
    {
        files: ["webview/**/*.ts"],
        languageOptions: {globals: {...globals.browser}}
    },
    {
        // As in node-llama-cpp: tests may run long (fixture tables, expected-value lists).
        files: ["test/**"],
        rules: {
            "@stylistic/max-len": "off"
        }
    }
);
