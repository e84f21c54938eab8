/**
 * The Go types Ollama hands its templates (template/template.go's templateMessage, templateTool,
 * templateArgs, ... and api.ToolProperty), built from request JSON with their Go behaviour:
 * field names, JSON tags and order, String() methods, nil slices and maps.
 */
import { goJson, orderedJson, tagGo, type GoType } from "./values.js";

const str = (v: unknown): string => (typeof v === "string" ? v : "");
const obj = (v: unknown): Record<string, unknown> | undefined => (v && typeof v === "object" && !Array.isArray(v) ? (v as Record<string, unknown>) : undefined);
const strings = (v: unknown): string[] | null => (Array.isArray(v) ? v.filter((x): x is string => typeof x === "string") : null);

/** A nil slice of a named Go type (prints/ranges as empty, marshals as null). */
function nilSlice(name: string, extra: Partial<GoType> = {}): unknown[] {
  return tagGo([], { kind: "slice", name, nil: true, ...extra });
}

const PROPERTY_TYPE: GoType = {
  kind: "slice",
  name: "api.PropertyType",
  string: (v: string[]) => (v.length === 0 ? "" : v.length === 1 ? v[0]! : `[${v.join(" ")}]`),
  json: (v: string[]) => (v.length === 1 ? goJson(v[0]) : goJson([...v])),
};

const TOOL_PROPERTY_FIELDS = [
  { name: "AnyOf", json: "anyOf", omitempty: true },
  { name: "Type", json: "type", omitempty: true },
  { name: "Items", json: "items", omitempty: true },
  { name: "Description", json: "description", omitempty: true },
  { name: "Enum", json: "enum", omitempty: true },
  { name: "Properties", json: "properties", omitempty: true },
  { name: "Required", json: "required", omitempty: true },
] as const;

const TOOL_PROPERTY: GoType = {
  kind: "struct",
  name: "api.ToolProperty",
  fields: TOOL_PROPERTY_FIELDS,
  methods: { ToTypeScriptType: (p: Record<string, unknown>) => toTypeScriptType(p) },
};

/** api.ToolProperty.ToTypeScriptType. */
function toTypeScriptType(p: Record<string, unknown>): string {
  const anyOf = p["AnyOf"] as Record<string, unknown>[];
  if (anyOf.length > 0) return anyOf.map(toTypeScriptType).join(" | ");
  const types = p["Type"] as string[];
  if (types.length === 0) return "any";
  return types.map(mapToTypeScriptType).join(" | ");
}

function mapToTypeScriptType(t: string): string {
  return (
    (
      { string: "string", number: "number", integer: "number", boolean: "boolean", array: "any[]", object: "Record<string, any>", null: "null" } as Record<
        string,
        string
      >
    )[t] ?? "any"
  );
}

/** *api.ToolPropertiesMap: an insertion-ordered map with no fields a template can read. */
function propertiesMap(v: Record<string, unknown>): unknown {
  const entries = Object.fromEntries(Object.entries(v).map(([k, p]) => [k, toolProperty(p)]));
  return tagGo(
    { entries },
    {
      kind: "struct",
      name: "*api.ToolPropertiesMap",
      fields: [],
      json: (m: { entries: Record<string, unknown> }) => orderedJson(m.entries),
      methods: { Len: (m: { entries: object }) => BigInt(Object.keys(m.entries).length) },
    },
  );
}

export function toolProperty(raw: unknown): Record<string, unknown> {
  const p = obj(raw) ?? {};
  const type = typeof p["type"] === "string" ? [p["type"]] : strings(p["type"]);
  return tagGo(
    {
      AnyOf: Array.isArray(p["anyOf"]) ? tagGo(p["anyOf"].map(toolProperty), { kind: "slice", name: "[]api.ToolProperty" }) : nilSlice("[]api.ToolProperty"),
      Type: tagGo(type ?? [], { ...PROPERTY_TYPE, nil: type === null }),
      Items: p["items"] ?? null,
      Description: str(p["description"]),
      Enum: Array.isArray(p["enum"]) ? p["enum"] : nilSlice("[]interface {}"),
      Properties: obj(p["properties"]) ? propertiesMap(obj(p["properties"])!) : null,
      Required: strings(p["required"]) ?? nilSlice("[]string"),
    },
    TOOL_PROPERTY,
  );
}

/** template.templateProperties: map[string]api.ToolProperty whose String() is its JSON. */
function templateProperties(raw: unknown): Record<string, unknown> {
  const src = obj(raw);
  const m: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(src ?? {})) m[k] = toolProperty(v);
  return tagGo(m, {
    kind: "map",
    name: "template.templateProperties",
    nil: src === undefined,
    elemZero: () => toolProperty({}),
    string: (x: object) => (src === undefined ? "{}" : goJson(x)),
  });
}

const TOOL_FUNCTION_PARAMETERS: GoType = {
  kind: "struct",
  name: "template.templateToolFunctionParameters",
  fields: [
    { name: "Type", json: "type" },
    { name: "Defs", json: "$defs", omitempty: true },
    { name: "Items", json: "items", omitempty: true },
    { name: "Required", json: "required", omitempty: true },
    { name: "Properties", json: "properties" },
  ],
};
const TOOL_FUNCTION: GoType = {
  kind: "struct",
  name: "template.templateToolFunction",
  fields: [{ name: "Name", json: "name" }, { name: "Description", json: "description" }, { name: "Parameters", json: "parameters" }],
};
const TOOL: GoType = {
  kind: "struct",
  name: "template.templateTool",
  fields: [{ name: "Type", json: "type" }, { name: "Items", json: "items", omitempty: true }, { name: "Function", json: "function" }],
  string: (t: object) => goJson(t),
};

/** convertToolsForTemplate: api.Tools → templateTools (nil stays nil). */
export function templateTools(tools: unknown[] | undefined): unknown[] {
  const type: GoType = { kind: "slice", name: "template.templateTools", string: (t: unknown[]) => goJson(t) };
  if (!tools) return tagGo([], { ...type, nil: true });
  return tagGo(
    tools.map((raw) => {
      const t = obj(raw) ?? {};
      const f = obj(t["function"]) ?? {};
      const p = obj(f["parameters"]) ?? {};
      const parameters = tagGo(
        {
          Type: str(p["type"]),
          Defs: p["$defs"] ?? null,
          Items: p["items"] ?? null,
          Required: strings(p["required"]) ?? nilSlice("[]string"),
          Properties: templateProperties(p["properties"]),
        },
        TOOL_FUNCTION_PARAMETERS,
      );
      const fn = tagGo({ Name: str(f["name"]), Description: str(f["description"]), Parameters: parameters }, TOOL_FUNCTION);
      return tagGo({ Type: str(t["type"]), Items: t["items"] ?? null, Function: fn }, TOOL);
    }),
    type,
  );
}

/** template.templateArgs: map[string]any whose String() is its JSON ("{}" when nil). */
function templateArgs(args: Record<string, unknown> | undefined): Record<string, unknown> {
  return tagGo(
    { ...(args ?? {}) },
    { kind: "map", name: "template.templateArgs", nil: args === undefined, string: (m: object) => (args === undefined ? "{}" : goJson(m)) },
  );
}

const TOOL_CALL_FUNCTION: GoType = {
  kind: "struct",
  name: "template.templateToolCallFunction",
  fields: [{ name: "Index" }, { name: "Name" }, { name: "Arguments" }],
};
const TOOL_CALL: GoType = { kind: "struct", name: "template.templateToolCall", fields: [{ name: "ID" }, { name: "Function" }] };
const MESSAGE: GoType = {
  kind: "struct",
  name: "*template.templateMessage",
  fields: ["Role", "Content", "Thinking", "Images", "ToolCalls", "ToolName", "ToolCallID"].map((name) => ({ name })),
};

export interface MessageIn {
  role: string;
  content: string;
  thinking?: string | undefined;
  images?: unknown[] | undefined;
  tool_calls?: { id?: string; function: { index?: number; name: string; arguments?: Record<string, unknown> } }[] | undefined;
  tool_name?: string | undefined;
  tool_call_id?: string | undefined;
}

/** convertMessagesForTemplate: api.Message → *templateMessage. */
export function templateMessages(messages: MessageIn[] | null): unknown[] {
  if (!messages) return nilSlice("[]*template.templateMessage");
  return tagGo(
    messages.map((m) => {
      const calls = (m.tool_calls ?? []).map((tc) =>
        tagGo(
          {
            ID: str(tc.id),
            Function: tagGo(
              { Index: BigInt(Math.trunc(tc.function.index ?? 0)), Name: str(tc.function.name), Arguments: templateArgs(tc.function.arguments) },
              TOOL_CALL_FUNCTION,
            ),
          },
          TOOL_CALL,
        ),
      );
      return tagGo(
        {
          Role: m.role,
          Content: m.content,
          Thinking: str(m.thinking),
          Images: m.images?.length ? tagGo([...m.images], { kind: "slice", name: "[]api.ImageData" }) : nilSlice("[]api.ImageData"),
          ToolCalls: calls.length ? tagGo(calls, { kind: "slice", name: "[]template.templateToolCall" }) : nilSlice("[]template.templateToolCall"),
          ToolName: str(m.tool_name),
          ToolCallID: str(m.tool_call_id),
        },
        MESSAGE,
      );
    }),
    { kind: "slice", name: "[]*template.templateMessage" },
  );
}
