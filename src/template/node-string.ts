/** Nodes printed back as template source, as Go's parse.Node String() does (used in error context). */
import type { ArgNode, CommandNode, Node, PipeNode } from "./ast.js";

export function nodeString(n: Node): string {
  switch (n.type) {
    case "field": return `.${n.ident.join(".")}`;
    case "variable": return n.ident.join(".");
    case "identifier": return n.ident;
    case "dot": return ".";
    case "nil": return "nil";
    case "bool": return String(n.value);
    case "number": return n.text;
    case "string": return n.quoted;
    case "chain": return `${n.node.type === "pipe" ? `(${nodeString(n.node)})` : nodeString(n.node)}.${n.field.join(".")}`;
    case "pipe": return pipeString(n);
    case "command": return commandString(n);
    case "action": return `{{${pipeString(n.pipe)}}}`;
    case "text": return n.text;
    case "comment": return `{{${n.text}}}`;
    case "list": return n.nodes.map(nodeString).join("");
    case "break": return "{{break}}";
    case "continue": return "{{continue}}";
    case "template": return `{{template ${JSON.stringify(n.name)}${n.pipe ? ` ${pipeString(n.pipe)}` : ""}}}`;
    case "if": case "range": case "with":
      return `{{${n.type} ${pipeString(n.pipe)}}}${nodeString(n.list)}${n.elseList ? `{{else}}${nodeString(n.elseList)}` : ""}{{end}}`;
  }
}

function pipeString(p: PipeNode): string {
  const decl = p.decl.length ? `${p.decl.map((v) => v.ident.join(".")).join(", ")} ${p.isAssign ? "=" : ":="} ` : "";
  return decl + p.cmds.map(commandString).join(" | ");
}

function commandString(c: CommandNode): string {
  return c.args.map((a: ArgNode) => (a.type === "pipe" ? `(${pipeString(a)})` : nodeString(a))).join(" ");
}
