/** `lmd show MODEL`: a model's details, or one part of it with a flag (POST /api/show). */
import { makeClient, out, runCommand, type CommandSpec } from "./common.js";
import type { ShowResponse } from "./wire.js";

export const spec: CommandSpec = {
  usage: "lmd show MODEL [--modelfile|--parameters|--template|--system|--license] [--verbose]",
  summary: "Show information for a model",
  minArgs: 1,
  maxArgs: 1,
  options: {
    modelfile: { type: "boolean" },
    parameters: { type: "boolean" },
    template: { type: "boolean" },
    system: { type: "boolean" },
    license: { type: "boolean" },
    verbose: { type: "boolean", short: "v" },
  },
  optionHelp: [
    "    --modelfile    show the Modelfile of the model",
    "    --parameters   show its parameters",
    "    --template     show its prompt template",
    "    --system       show its system message",
    "    --license      show its license",
    "-v, --verbose      show every metadata field of the model",
  ],
  examples: ["lmd show llama3.2", "lmd show llama3.2 --modelfile > Modelfile"],
};

const PARTS = ["modelfile", "parameters", "template", "system", "license"] as const;

export async function run(argv: string[]): Promise<void> {
  await runCommand(spec, argv, async ({ positionals: [model], values }) => {
    const client = makeClient();
    const verbose = values.verbose === true;
    const info = await client.json<ShowResponse>("POST", "/api/show", { model, verbose });
    await client.close();
    const part = PARTS.find((p) => values[p] === true);
    if (part !== undefined) {
      const text = info[part] ?? "";
      return out(text === "" || text.endsWith("\n") ? text : `${text}\n`);
    }
    return out(describe(info, verbose));
  });
}

/** The sections Ollama prints: Model, Capabilities, Parameters, System, License (and Metadata with -v). */
export function describe(info: ShowResponse, verbose = false): string {
  const mi = info.model_info ?? {};
  const arch = String(mi["general.architecture"] ?? info.details?.family ?? "");
  const rows: [string, string][] = [
    ["architecture", arch],
    ["parameters", info.details?.parameter_size ?? paramCount(mi["general.parameter_count"])],
    ["context length", str(mi[`${arch}.context_length`])],
    ["embedding length", str(mi[`${arch}.embedding_length`])],
    ["quantization", info.details?.quantization_level ?? ""],
  ];
  const sections: string[] = [section("Model", rows.filter(([, v]) => v !== ""))];
  if (info.capabilities?.length) sections.push(section("Capabilities", info.capabilities.map((c) => [c, ""])));
  const params = (info.parameters ?? "").split("\n").filter((l) => l.trim() !== "").map((l): [string, string] => {
    const m = /^(\S+)\s+(.*)$/.exec(l.trim());
    return [m?.[1] ?? l, m?.[2] ?? ""];
  });
  if (params.length) sections.push(section("Parameters", params));
  if (info.system) sections.push(section("System", firstLines(info.system)));
  if (info.license) sections.push(section("License", firstLines(info.license)));
  if (verbose) sections.push(section("Metadata", Object.entries(mi).map(([k, v]) => [k, str(v)])));
  return `${sections.join("\n")}\n`;
}

function section(title: string, rows: [string, string][]): string {
  const width = Math.max(0, ...rows.map(([k]) => k.length));
  return `  ${title}\n${rows.map(([k, v]) => `    ${v === "" ? k : `${k.padEnd(width)}    ${v}`}`.trimEnd()).join("\n")}\n`;
}

function firstLines(text: string, n = 2): [string, string][] {
  const lines = text.trim().split("\n").slice(0, n).map((l): [string, string] => [l, ""]);
  if (text.trim().split("\n").length > n) lines.push(["...", ""]);
  return lines;
}

function str(v: unknown): string {
  if (v === undefined || v === null) return "";
  return typeof v === "object" ? JSON.stringify(v) : String(v);
}

function paramCount(v: unknown): string {
  if (typeof v !== "number") return "";
  if (v >= 1e9) return `${(v / 1e9).toFixed(1)}B`;
  if (v >= 1e6) return `${(v / 1e6).toFixed(1)}M`;
  return `${(v / 1e3).toFixed(1)}K`;
}
