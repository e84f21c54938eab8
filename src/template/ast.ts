/**
 * The parse tree of a Go text/template, shaped like Go's `text/template/parse` nodes so code that
 * walks Ollama-style (Identifiers, deleteNode, Subtree) reads the same. `pos` is the byte offset of
 * the node in the source (UTF-16 offset here); `line` is 1-based where kept.
 */

export type Node =
  | ListNode
  | TextNode
  | CommentNode
  | ActionNode
  | IfNode
  | RangeNode
  | WithNode
  | BreakNode
  | ContinueNode
  | TemplateNode
  | PipeNode
  | CommandNode
  | ArgNode;

/** The operands a command may take. */
export type ArgNode =
  | FieldNode
  | VariableNode
  | ChainNode
  | IdentifierNode
  | DotNode
  | NilNode
  | BoolNode
  | NumberNode
  | StringNode
  | PipeNode;

export interface ListNode {
  readonly type: "list";
  pos: number;
  nodes: Node[];
}
export interface TextNode {
  readonly type: "text";
  pos: number;
  text: string;
}
export interface CommentNode {
  readonly type: "comment";
  pos: number;
  text: string;
}
/** `{{ pipeline }}`: prints the pipeline's value unless it declares or assigns variables. */
export interface ActionNode {
  readonly type: "action";
  pos: number;
  line: number;
  pipe: PipeNode;
}
/** A pipeline: optional variable declaration (`$x :=`) or assignment (`$x =`) and `|`-chained commands. */
export interface PipeNode {
  readonly type: "pipe";
  pos: number;
  line: number;
  isAssign: boolean;
  decl: VariableNode[];
  cmds: CommandNode[];
}
export interface CommandNode {
  readonly type: "command";
  pos: number;
  args: ArgNode[];
}
/** `.A.B` — ident is ["A", "B"]. */
export interface FieldNode {
  readonly type: "field";
  pos: number;
  ident: string[];
}
/** `$x.A.B` — ident is ["$x", "A", "B"]; `$` alone is ["$"]. */
export interface VariableNode {
  readonly type: "variable";
  pos: number;
  ident: string[];
}
/** `(pipeline).A.B` or `$x.A` after a non-field operand — node followed by field names. */
export interface ChainNode {
  readonly type: "chain";
  pos: number;
  node: ArgNode;
  field: string[];
}
/** A function name. */
export interface IdentifierNode {
  readonly type: "identifier";
  pos: number;
  ident: string;
}
export interface DotNode {
  readonly type: "dot";
  pos: number;
}
export interface NilNode {
  readonly type: "nil";
  pos: number;
}
export interface BoolNode {
  readonly type: "bool";
  pos: number;
  value: boolean;
}
/** A numeric constant: `text` as written; the kinds it can be read as, like Go's NumberNode. */
export interface NumberNode {
  readonly type: "number";
  pos: number;
  text: string;
  isInt: boolean;
  isFloat: boolean;
  isComplex: boolean;
  /** Integer value when isInt (bigint keeps Go's int64 range exact). */
  int: bigint;
  float: number;
  /** A character constant like 'a' (prints as its code point, as in Go). */
  isChar: boolean;
}
export interface StringNode {
  readonly type: "string";
  pos: number;
  quoted: string;
  text: string;
}
/** The shared shape of if, range and with. */
export interface BranchFields {
  pos: number;
  line: number;
  pipe: PipeNode;
  list: ListNode;
  elseList: ListNode | null;
}
export interface IfNode extends BranchFields {
  readonly type: "if";
}
export interface RangeNode extends BranchFields {
  readonly type: "range";
}
export interface WithNode extends BranchFields {
  readonly type: "with";
}
export interface BreakNode {
  readonly type: "break";
  pos: number;
  line: number;
}
export interface ContinueNode {
  readonly type: "continue";
  pos: number;
  line: number;
}
/** `{{ template "name" pipeline }}`. */
export interface TemplateNode {
  readonly type: "template";
  pos: number;
  line: number;
  name: string;
  pipe: PipeNode | null;
}

export type BranchNode = IfNode | RangeNode | WithNode;

/** Whether `n` is if, range or with. */
export function isBranch(n: Node): n is BranchNode {
  return n.type === "if" || n.type === "range" || n.type === "with";
}
