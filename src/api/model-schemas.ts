/**
 * JSON Schemas of the model-management request bodies (compiled by http/validate.ts, which
 * turns the first failure into the contract's 400 message). `model` is not `required` here
 * because `name` is its alias: the routes check that one of the two is present.
 */
import type { SchemaObject } from "ajv";
import { optionsSchema } from "./schemas.js";

const name = { type: "string" } as const;

export const showSchema: SchemaObject = {
  type: "object",
  properties: { model: name, name, verbose: { type: "boolean" }, system: { type: "string" }, template: { type: "string" } },
};

export const pullSchema: SchemaObject = {
  type: "object",
  properties: { model: name, name, insecure: { type: "boolean" }, stream: { type: "boolean" }, username: { type: "string" }, password: { type: "string" } },
};

export const pushSchema: SchemaObject = pullSchema;

export const deleteSchema: SchemaObject = {
  type: "object",
  properties: { model: name, name },
};

export const copySchema: SchemaObject = {
  type: "object",
  required: ["source", "destination"],
  properties: { source: { type: "string", minLength: 1 }, destination: { type: "string", minLength: 1 } },
};

const digestMap = { type: "object", additionalProperties: { type: "string" }, maxProperties: 64 } as const;

export const createSchema: SchemaObject = {
  type: "object",
  properties: {
    model: name,
    name,
    from: { type: "string" },
    files: digestMap,
    adapters: digestMap,
    template: { type: "string" },
    system: { type: "string" },
    // The ranges and types a request's `options` has: a value no request could send is never stored.
    parameters: optionsSchema,
    draft: { type: "string", minLength: 1 },
    renderer: { type: "string", maxLength: 128 },
    parser: { type: "string", maxLength: 128 },
    messages: {
      type: "array",
      maxItems: 1024,
      items: {
        type: "object",
        required: ["role", "content"],
        properties: { role: { enum: ["system", "user", "assistant"] }, content: { type: "string" } },
      },
    },
    license: { type: ["string", "array"], items: { type: "string" } },
    stream: { type: "boolean" },
    quantize: { type: "string" },
    draft_files: digestMap,
    draft_quantize: { type: "string" },
  },
};
