/**
 * Go's text/template as Ollama uses it: parse once (linear, bounded), execute many times against
 * plain data (bounded), and Ollama's Template.Execute on top. Leaf module: imports only errors.ts.
 */
export type * from "./ast.js";
export { isBranch } from "./ast.js";
export { parseTemplate, MAX_TEMPLATE_BYTES, type Template, type ExecLimits } from "./template.js";
export { renderInWorker } from "./render-pool.js";
export { renderOllama, collate, type OllamaMessage, type OllamaToolCall, type OllamaValues } from "./ollama.js";
export { templateMessages, templateTools } from "./ollama-types.js";
export { identifiers, deleteNode, findNode, copyNode } from "./walk.js";
export { nodeString } from "./node-string.js";
export { goJson, formatValue } from "./values.js";
