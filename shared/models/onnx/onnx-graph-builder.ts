import { endianness } from 'node:os';
import {
  encodeOnnxModel,
  type OnnxAttributeValue,
  type OnnxDataTypeName,
  type OnnxNode,
  type OnnxTensor,
  type OnnxValueInfo,
} from './onnx-proto-writer';

/** Attribute values as plain JS: numbers are ints unless wrapped with `floatAttribute`. */
export type AttributeInput = number | number[] | string | OnnxAttributeValue;

/** Marks a number attribute as a float (`epsilon`, `alpha`, ...). */
export function floatAttribute(value: number): OnnxAttributeValue {
  return { kind: 'float', value };
}

/**
 * Builds an ONNX graph node by node with generated unique value names, so graph code reads like
 * the computation it describes (`const h = graph.op('MatMul', [x, w])`).
 */
export class OnnxGraphBuilder {
  private readonly nodes: OnnxNode[] = [];
  private readonly initializers: OnnxTensor[] = [];
  private readonly inputs: OnnxValueInfo[] = [];
  private readonly outputs: OnnxValueInfo[] = [];
  private readonly usedNames = new Set<string>();
  private readonly sharedConstants = new Map<string, string>();
  private counter = 0;

  constructor(private readonly graphName: string) {}

  private uniqueName(base: string): string {
    let name = base;
    while (this.usedNames.has(name)) name = `${base}_${++this.counter}`;
    this.usedNames.add(name);
    return name;
  }

  input(name: string, dataType: OnnxDataTypeName, shape: Array<number | string>): string {
    this.inputs.push({ name: this.uniqueName(name), dataType, shape });
    return name;
  }

  /** Declares a graph output; `value` is renamed to `name` through an Identity when they differ. */
  output(value: string, name: string, dataType: OnnxDataTypeName, shape: Array<number | string>): void {
    if (value !== name) this.op('Identity', [value], {}, name);
    this.outputs.push({ name, dataType, shape });
  }

  floatConstant(name: string, dims: number[], values: Float32Array | number[]): string {
    const data = values instanceof Float32Array ? values : Float32Array.from(values);
    return this.addInitializer(name, 'float', dims, littleEndianBytes(data));
  }

  /** Small int64 constants (shapes, axes) are shared: the same name and values give one initializer. */
  int64Constant(name: string, dims: number[], values: number[]): string {
    const key = `${name}|${dims.join(',')}|${values.join(',')}`;
    const existing = this.sharedConstants.get(key);
    if (existing) return existing;
    const created = this.addInitializer(name, 'int64', dims, littleEndianBytes(BigInt64Array.from(values.map(BigInt))));
    this.sharedConstants.set(key, created);
    return created;
  }

  private addInitializer(name: string, dataType: OnnxDataTypeName, dims: number[], rawData: Uint8Array): string {
    const unique = this.uniqueName(name);
    this.initializers.push({ name: unique, dataType, dims, rawData });
    return unique;
  }

  /** Adds one node and returns its (first) output name; `outputName` fixes that name. */
  op(opType: string, inputs: string[], attributes: Record<string, AttributeInput> = {}, outputName?: string): string {
    return this.opMulti(opType, inputs, 1, attributes, outputName ? [outputName] : undefined)[0];
  }

  opMulti(
    opType: string,
    inputs: string[],
    outputCount: number,
    attributes: Record<string, AttributeInput> = {},
    outputNames?: string[],
  ): string[] {
    const base = opType.replace(/[A-Z]/g, (letter, index: number) =>
      index === 0 ? letter.toLowerCase() : `_${letter.toLowerCase()}`,
    );
    const outputs = Array.from({ length: outputCount }, (_, index) =>
      outputNames?.[index]
        ? this.uniqueName(outputNames[index])
        : this.uniqueName(`${base}_${this.nodes.length}_${index}`),
    );
    this.nodes.push({
      opType,
      name: this.uniqueName(`${opType}_${this.nodes.length}`),
      inputs,
      outputs,
      attributes: Object.fromEntries(Object.entries(attributes).map(([key, value]) => [key, toAttribute(value)])),
    });
    return outputs;
  }

  /** The model file as buffers, in order (write them one after another). */
  encode(options: {
    opsetVersion: number;
    producerName: string;
    producerVersion: string;
    metadata?: Record<string, string>;
  }): Uint8Array[] {
    return encodeOnnxModel({
      // IR version 8 is the one that goes with opset 17 (onnx/docs/Versioning.md).
      irVersion: 8,
      opsetVersion: options.opsetVersion,
      producerName: options.producerName,
      producerVersion: options.producerVersion,
      metadata: options.metadata,
      graph: {
        name: this.graphName,
        nodes: this.nodes,
        initializers: this.initializers,
        inputs: this.inputs,
        outputs: this.outputs,
      },
    });
  }
}

function toAttribute(value: AttributeInput): OnnxAttributeValue {
  if (typeof value === 'number') return { kind: 'int', value };
  if (typeof value === 'string') return { kind: 'string', value };
  if (Array.isArray(value)) return { kind: 'ints', value };
  return value;
}

/** ONNX raw_data is little-endian; typed arrays use the host's byte order. */
function littleEndianBytes(data: Float32Array | BigInt64Array): Uint8Array {
  if (endianness() === 'LE') return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
  const bytes = Buffer.alloc(data.byteLength);
  data.forEach((value: number | bigint, index: number) => {
    if (typeof value === 'bigint') bytes.writeBigInt64LE(value, index * 8);
    else bytes.writeFloatLE(value, index * 4);
  });
  return bytes;
}
