/**
 * Write-only protobuf encoding of the subset of ONNX's `ModelProto` the dummy decoder needs.
 *
 * Written by hand because the npm options are a stale generated package (`onnx-proto`, on
 * protobufjs 6) or a general protobuf runtime plus a vendored `onnx.proto`; what we need is eight
 * message types, writing only, and onnxruntime itself validates the result when it loads it.
 * Field numbers follow onnx/onnx.proto (IR version 8).
 *
 * Encoded messages are kept as lists of buffers so a large initializer is never copied while its
 * enclosing messages are framed.
 */

/** ONNX `TensorProto.DataType` values used here. */
export const OnnxDataType = {
  float: 1,
  int32: 6,
  int64: 7,
  bool: 9,
} as const;
export type OnnxDataTypeName = keyof typeof OnnxDataType;

export interface OnnxTensor {
  name: string;
  dataType: OnnxDataTypeName;
  dims: number[];
  /** Little-endian raw bytes of the elements (`raw_data`). */
  rawData: Uint8Array;
}

export type OnnxAttributeValue =
  | { kind: 'float'; value: number }
  | { kind: 'int'; value: number }
  | { kind: 'ints'; value: number[] }
  | { kind: 'string'; value: string }
  | { kind: 'tensor'; value: OnnxTensor };

export interface OnnxNode {
  opType: string;
  name: string;
  inputs: string[];
  outputs: string[];
  attributes?: Record<string, OnnxAttributeValue>;
}

export interface OnnxValueInfo {
  name: string;
  dataType: OnnxDataTypeName;
  /** A number is a fixed dimension, a string a symbolic one (`dim_param`). */
  shape: Array<number | string>;
}

export interface OnnxModel {
  irVersion: number;
  opsetVersion: number;
  producerName: string;
  producerVersion: string;
  graph: {
    name: string;
    nodes: OnnxNode[];
    initializers: OnnxTensor[];
    inputs: OnnxValueInfo[];
    outputs: OnnxValueInfo[];
  };
  metadata?: Record<string, string>;
}

/** A message body as buffers plus its total length. */
interface Encoded {
  chunks: Uint8Array[];
  length: number;
}

const wireVarint = 0;
const wireFixed32 = 5;
const wireLengthDelimited = 2;

class MessageWriter {
  private readonly chunks: Uint8Array[] = [];
  private length = 0;

  private push(chunk: Uint8Array): void {
    this.chunks.push(chunk);
    this.length += chunk.length;
  }

  private tag(field: number, wireType: number): void {
    this.push(encodeVarint(BigInt((field << 3) | wireType)));
  }

  int(field: number, value: number): this {
    this.tag(field, wireVarint);
    this.push(encodeVarint(BigInt(value)));
    return this;
  }

  float(field: number, value: number): this {
    this.tag(field, wireFixed32);
    const bytes = Buffer.alloc(4);
    bytes.writeFloatLE(value);
    this.push(bytes);
    return this;
  }

  string(field: number, value: string): this {
    return this.bytes(field, Buffer.from(value, 'utf8'));
  }

  bytes(field: number, value: Uint8Array): this {
    this.tag(field, wireLengthDelimited);
    this.push(encodeVarint(BigInt(value.length)));
    this.push(value);
    return this;
  }

  packedInts(field: number, values: number[]): this {
    return this.bytes(field, Buffer.concat(values.map((value) => encodeVarint(BigInt(value)))));
  }

  message(field: number, body: Encoded): this {
    this.tag(field, wireLengthDelimited);
    this.push(encodeVarint(BigInt(body.length)));
    for (const chunk of body.chunks) this.push(chunk);
    return this;
  }

  finish(): Encoded {
    return { chunks: this.chunks, length: this.length };
  }
}

/** Protobuf varint; negative int64 values take ten bytes (two's complement), as the format says. */
function encodeVarint(value: bigint): Uint8Array {
  let remaining = BigInt.asUintN(64, value);
  const bytes: number[] = [];
  do {
    let byte = Number(remaining & 0x7fn);
    remaining >>= 7n;
    if (remaining !== 0n) byte |= 0x80;
    bytes.push(byte);
  } while (remaining !== 0n);
  return Uint8Array.from(bytes);
}

function encodeTensor(tensor: OnnxTensor): Encoded {
  const writer = new MessageWriter();
  if (tensor.dims.length > 0) writer.packedInts(1, tensor.dims);
  writer.int(2, OnnxDataType[tensor.dataType]);
  writer.string(8, tensor.name);
  writer.bytes(9, tensor.rawData);
  return writer.finish();
}

const attributeType = { float: 1, int: 2, string: 3, tensor: 4, ints: 7 } as const;

function encodeAttribute(name: string, attribute: OnnxAttributeValue): Encoded {
  const writer = new MessageWriter().string(1, name);
  switch (attribute.kind) {
    case 'float':
      writer.float(2, attribute.value);
      break;
    case 'int':
      writer.int(3, attribute.value);
      break;
    case 'string':
      writer.string(4, attribute.value);
      break;
    case 'tensor':
      writer.message(5, encodeTensor(attribute.value));
      break;
    case 'ints':
      writer.packedInts(8, attribute.value);
      break;
  }
  writer.int(20, attributeType[attribute.kind]);
  return writer.finish();
}

function encodeNode(node: OnnxNode): Encoded {
  const writer = new MessageWriter();
  for (const input of node.inputs) writer.string(1, input);
  for (const output of node.outputs) writer.string(2, output);
  writer.string(3, node.name);
  writer.string(4, node.opType);
  for (const [name, attribute] of Object.entries(node.attributes ?? {}))
    writer.message(5, encodeAttribute(name, attribute));
  return writer.finish();
}

function encodeValueInfo(info: OnnxValueInfo): Encoded {
  const shape = new MessageWriter();
  for (const dimension of info.shape) {
    const dim = new MessageWriter();
    if (typeof dimension === 'number') dim.int(1, dimension);
    else dim.string(2, dimension);
    shape.message(1, dim.finish());
  }
  const tensorType = new MessageWriter().int(1, OnnxDataType[info.dataType]).message(2, shape.finish());
  const type = new MessageWriter().message(1, tensorType.finish());
  return new MessageWriter().string(1, info.name).message(2, type.finish()).finish();
}

/** Encodes a model as the buffers of one `.onnx` file, in order. */
export function encodeOnnxModel(model: OnnxModel): Uint8Array[] {
  const graph = new MessageWriter();
  for (const node of model.graph.nodes) graph.message(1, encodeNode(node));
  graph.string(2, model.graph.name);
  for (const initializer of model.graph.initializers) graph.message(5, encodeTensor(initializer));
  for (const input of model.graph.inputs) graph.message(11, encodeValueInfo(input));
  for (const output of model.graph.outputs) graph.message(12, encodeValueInfo(output));

  const writer = new MessageWriter()
    .int(1, model.irVersion)
    .string(2, model.producerName)
    .string(3, model.producerVersion)
    .message(7, graph.finish())
    .message(8, new MessageWriter().string(1, '').int(2, model.opsetVersion).finish());
  for (const [key, value] of Object.entries(model.metadata ?? {})) {
    writer.message(14, new MessageWriter().string(1, key).string(2, value).finish());
  }
  return writer.finish().chunks;
}
