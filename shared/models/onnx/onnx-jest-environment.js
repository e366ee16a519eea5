/**
 * Jest's node environment with the host's typed-array constructors. onnxruntime-node creates
 * output tensors in the host realm, and onnxruntime-common checks them with `instanceof
 * Float32Array` inside the test sandbox, where that is another realm's constructor, so every
 * session run fails with "A float32 tensor's data must be type of Float32Array". Jest already
 * shares ArrayBuffer and Uint8Array the same way. Use it with a `@jest-environment` docblock.
 */
const { TestEnvironment } = require('jest-environment-node');

const typedArrays = [
  Int8Array,
  Uint8ClampedArray,
  Int16Array,
  Uint16Array,
  Int32Array,
  Uint32Array,
  Float32Array,
  Float64Array,
  BigInt64Array,
  BigUint64Array,
];

class OnnxJestEnvironment extends TestEnvironment {
  constructor(config, context) {
    super(config, context);
    for (const constructor of typedArrays) this.global[constructor.name] = constructor;
  }
}

module.exports = OnnxJestEnvironment;
