/**
 * The grammar of `format: "json"`: any JSON object, as llama.cpp's json.gbnf (which node-llama-cpp
 * ships) writes it, except its numbers. That grammar lets an exponent run to sixteen digits, so a
 * model could write `1e9999999999999999`, which every JSON parser reads as Infinity (or refuses);
 * here an exponent has at most two digits and the integer part at most sixteen, so every number
 * parses to a finite value. Whitespace after a value is bounded as in json.gbnf.
 */
import { LlamaText, type Llama, type LlamaGrammar } from "node-llama-cpp";

export const JSON_GBNF = String.raw`root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::= "{" ws ( string ":" ws value ("," ws string ":" ws value)* )? "}" ws
array  ::= "[" ws ( value ("," ws value)* )? "]" ws
string ::= "\"" ( [^"\\\x7F\x00-\x1F] | "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) )* "\"" ws
number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,2})? ws
ws ::= | " " | "\n" [ \t]{0,20}
`;

const grammars = new WeakMap<Llama, Promise<LlamaGrammar>>();

/** The `format: "json"` grammar for this llama (made once): four newlines in a row end the answer, as node-llama-cpp's own. */
export function jsonGrammar(llama: Llama): Promise<LlamaGrammar> {
  let grammar = grammars.get(llama);
  if (!grammar) {
    grammar = llama.createGrammar({ grammar: JSON_GBNF, stopGenerationTriggers: [LlamaText("\n".repeat(4))], trimWhitespaceSuffix: true });
    grammars.set(llama, grammar);
  }
  return grammar;
}
