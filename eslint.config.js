// `npm run lint` (run by .ci/run): src/, test/, bench/ and scripts/.
// ESLint with typescript-eslint rather than Biome: the rules that catch real bugs here (no-floating-promises,
// no-misused-promises) need the TypeScript type checker, which Biome does not run.
import js from "@eslint/js";
import { defineConfig } from "eslint/config";
import tseslint from "typescript-eslint";

const STRING = String.raw`(?:"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|\x60(?:[^\x60\\]|\\.)*\x60)`;
const ONE_STRING_LINE = String.raw`^\s*(?:[\w$.]+: |return |(?:const|let) \w+ = )?${STRING}[,;)]*(?: \+)?$`;

export default defineConfig(
  // What .gitignore leaves out (build output, test results, scratch folders); the fixtures are templates, not code.
  { ignores: ["dist/", ".tap/", "tmp/", ".gl/", ".gpu/", "test/fixtures/"] },
  js.configs.recommended,
  tseslint.configs.recommended,
  {
    files: ["**/*.ts"],
    languageOptions: {
      // tsconfig.eslint.json is tsconfig.json plus test/, which the build does not compile.
      parserOptions: { project: "./tsconfig.eslint.json", tsconfigRootDir: import.meta.dirname },
    },
    rules: {
      // tap queues subtests itself, so `t.test(...)` needs no await; every other promise does.
      "@typescript-eslint/no-floating-promises": [
        "error",
        { allowForKnownSafePromises: [{ from: "package", name: "PromiseWithSubtest", package: "@tapjs/core" }] },
      ],
      "@typescript-eslint/no-misused-promises": "error",
      "@typescript-eslint/await-thenable": "error",
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "@typescript-eslint/no-import-type-side-effects": "error",
    },
  },
  {
    rules: {
      "@typescript-eslint/no-unused-vars": [
        "error",
        { argsIgnorePattern: "^_", varsIgnorePattern: "^_", caughtErrorsIgnorePattern: "^_", destructuredArrayIgnorePattern: "^_" },
      ],
      // Allowed only on a line whose eslint-disable-next-line comment says why.
      "@typescript-eslint/no-explicit-any": "error",
      // A line that is one string literal (a template, a message matched exactly) may run longer: cut in
      // pieces it would no longer be found by a search for the text.
      "max-len": ["error", { code: 160, ignoreUrls: true, ignoreRegExpLiterals: true, ignorePattern: ONE_STRING_LINE }],
      eqeqeq: ["error", "always", { null: "ignore" }],
      // `self` only where a function that cannot be an arrow (a generator, an object's method) needs the instance.
      "@typescript-eslint/no-this-alias": ["error", { allowedNames: ["self"] }],
      "no-var": "error",
      "prefer-const": "error",
    },
    linterOptions: { reportUnusedDisableDirectives: "error" },
  },
  {
    files: ["**/*.mjs"],
    languageOptions: {
      globals: { process: "readonly", console: "readonly", URL: "readonly", Buffer: "readonly", setTimeout: "readonly", clearTimeout: "readonly" },
    },
  },
);
