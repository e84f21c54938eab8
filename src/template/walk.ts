/** Tree walks Ollama does on a parsed template (template/template.go: Identifiers, deleteNode). */
import type { ActionNode, ArgNode, BranchNode, ListNode, Node, PipeNode } from "./ast.js";

/** Ollama's Identifiers() refuses a few shapes; its Parse fails with these messages. */
export class IdentifierError extends Error {}

/** Ollama's Identifiers(): field and variable names, walking actions, branches, lists and pipes (not chains). */
export function identifiers(n: Node): string[] {
  switch (n.type) {
    case "list": return n.nodes.flatMap(identifiers);
    case "template":
      if (!n.pipe) throw new IdentifierError("undefined template specified");
      return identifiers(n.pipe);
    case "action": return identifiers(n.pipe);
    case "if": case "range": case "with":
      return [...identifiers(n.pipe), ...identifiers(n.list), ...(n.elseList ? identifiers(n.elseList) : [])];
    case "pipe": return n.cmds.flatMap((c) => c.args.flatMap(identifiers));
    case "field": case "variable": return n.ident;
    default: return [];
  }
}

/** A deep copy of a tree, so walks that edit (deleteNode) leave the parsed template intact. */
export function copyNode<T extends Node>(n: T): T {
  return structuredClone(n);
}

/**
 * Ollama's deleteNode(): walks the tree in order and drops every node the predicate matches,
 * dropping actions whose pipelines end up empty. Used to cut a legacy template after `.Response`.
 * Where Go would panic (a branch's list deleted whole after the cut), the list is dropped instead.
 */
export function deleteNode(root: ListNode, fn: (n: Node) => boolean): ListNode {
  const walk = (n: Node): Node | null => {
    if (fn(n)) return null;
    switch (n.type) {
      case "list":
        n.nodes = n.nodes.map(walk).filter((c): c is Node => c !== null);
        return n;
      case "if": case "range": case "with": {
        const b = n as BranchNode;
        b.list = (walk(b.list) as ListNode | null) ?? { type: "list", pos: b.list.pos, nodes: [] };
        if (b.elseList) b.elseList = walk(b.elseList) as ListNode | null;
        return n;
      }
      case "action": {
        const p = walk(n.pipe);
        if (!p) return null;
        (n as ActionNode).pipe = p as PipeNode;
        return n;
      }
      case "pipe": {
        const cmds = [];
        for (const c of n.cmds) {
          const args = c.args.map((a) => walk(a)).filter((a): a is ArgNode => a !== null);
          if (args.length === 0) return null;
          c.args = args;
          cmds.push(c);
        }
        if (cmds.length === 0) return null;
        n.cmds = cmds;
        return n;
      }
      default:
        return n;
    }
  };
  return (walk(root) as ListNode | null) ?? { type: "list", pos: root.pos, nodes: [] };
}

/** Ollama's Template.Subtree walk: the first node (depth first, lists and branch bodies) matching `fn`. */
export function findNode(n: Node, fn: (n: Node) => boolean): Node | null {
  if (fn(n)) return n;
  if (n.type === "list") {
    for (const c of n.nodes) {
      const hit = findNode(c, fn);
      if (hit) return hit;
    }
  } else if (n.type === "if" || n.type === "range" || n.type === "with") {
    for (const l of [n.list, n.elseList]) {
      const hit = l ? findNode(l, fn) : null;
      if (hit) return hit;
    }
  }
  return null;
}
