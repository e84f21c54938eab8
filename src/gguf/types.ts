/**
 * The fixed tables of the GGUF format (https://github.com/ggml-org/ggml/blob/master/docs/gguf.md):
 * metadata value types, and ggml tensor types with their block sizes.
 *
 * The tensor table is the one the bundled llama.cpp reports (`getTypeSizeForGgmlType` and
 * `getBlockSizeForGgmlType` of node-llama-cpp 3.22.1's bindings): types it no longer supports
 * (Q4_2, Q4_3, the Q4_0_4_4 / IQ4_NL_4_4 repacked families) are left out, so a file using them is
 * refused before a runner is started rather than failing inside llama.cpp.
 */

/** Metadata value types (`gguf_type`). */
export enum GgufValueType {
  U8 = 0, I8 = 1, U16 = 2, I16 = 3, U32 = 4, I32 = 5, F32 = 6, BOOL = 7, STRING = 8, ARRAY = 9, U64 = 10, I64 = 11, F64 = 12,
}

/** Byte size of each fixed-size metadata value type. */
export const FIXED_VALUE_SIZE: Partial<Record<GgufValueType, number>> = {
  [GgufValueType.U8]: 1, [GgufValueType.I8]: 1, [GgufValueType.U16]: 2, [GgufValueType.I16]: 2,
  [GgufValueType.U32]: 4, [GgufValueType.I32]: 4, [GgufValueType.F32]: 4, [GgufValueType.BOOL]: 1,
  [GgufValueType.U64]: 8, [GgufValueType.I64]: 8, [GgufValueType.F64]: 8,
};

/** A ggml tensor type: `typeSize` bytes hold one block of `blockSize` elements. */
export interface GgmlType {
  name: string;
  typeSize: number;
  blockSize: number;
}

const t = (name: string, typeSize: number, blockSize: number): GgmlType => ({ name, typeSize, blockSize });

/** Tensor types (`ggml_type`) the bundled llama.cpp can load, by their number. */
export const GGML_TYPES: ReadonlyMap<number, GgmlType> = new Map([
  [0, t("F32", 4, 1)], [1, t("F16", 2, 1)], [2, t("Q4_0", 18, 32)], [3, t("Q4_1", 20, 32)],
  [6, t("Q5_0", 22, 32)], [7, t("Q5_1", 24, 32)], [8, t("Q8_0", 34, 32)], [9, t("Q8_1", 36, 32)],
  [10, t("Q2_K", 84, 256)], [11, t("Q3_K", 110, 256)], [12, t("Q4_K", 144, 256)], [13, t("Q5_K", 176, 256)],
  [14, t("Q6_K", 210, 256)], [15, t("Q8_K", 292, 256)], [16, t("IQ2_XXS", 66, 256)], [17, t("IQ2_XS", 74, 256)],
  [18, t("IQ3_XXS", 98, 256)], [19, t("IQ1_S", 50, 256)], [20, t("IQ4_NL", 18, 32)], [21, t("IQ3_S", 110, 256)],
  [22, t("IQ2_S", 82, 256)], [23, t("IQ4_XS", 136, 256)], [24, t("I8", 1, 1)], [25, t("I16", 2, 1)],
  [26, t("I32", 4, 1)], [27, t("I64", 8, 1)], [28, t("F64", 8, 1)], [29, t("IQ1_M", 56, 256)],
  [30, t("BF16", 2, 1)], [34, t("TQ1_0", 54, 256)], [35, t("TQ2_0", 66, 256)], [39, t("MXFP4", 17, 32)],
  [40, t("NVFP4", 36, 64)], [41, t("Q1_0", 18, 128)], [42, t("Q2_0", 18, 64)],
]);

/** ggml's GGML_MAX_DIMS: llama.cpp refuses tensors with more dimensions. */
export const GGML_MAX_DIMS = 4;
/** ggml's GGML_MAX_NAME: a tensor name must be shorter than this (bytes, with its NUL). */
export const GGML_MAX_NAME = 64;
/** `general.alignment` when the file does not set it. */
export const GGUF_DEFAULT_ALIGNMENT = 32;
/** Largest element count or byte size ggml can represent (int64). */
export const INT64_MAX = (1n << 63n) - 1n;
