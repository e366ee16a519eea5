/**
 * Jest's node environment, with two changes:
 * - The host's typed-array constructors. onnxruntime-node creates output tensors in the host
 *   realm, and onnxruntime-common checks them with `instanceof Float32Array` inside the test
 *   sandbox, where that is another realm's constructor, so every session run fails with "A float32
 *   tensor's data must be type of Float32Array". Jest already shares ArrayBuffer and Uint8Array
 *   the same way.
 * - A vanilla context (`vm.constants.DONT_CONTEXTIFY`, Node >= 20.18) instead of a contextified
 *   sandbox object. In a contextified context every global lookup (`Math`, `Map`, `JSON`, ...)
 *   goes through Node's interceptors: `Math.imul` in a loop ran about 80 times slower than outside
 *   Jest, so the seeded generator, dummy-model weights, catalogs and tokenizers were several times
 *   slower under test than in production. A vanilla context is still a fresh realm per test file;
 *   what it loses is Jest's deletion, at teardown, of the properties a test file set on its global.
 * jest.config.js makes it every project's environment.
 */
const vm = require('node:vm');
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
    // jest-environment-node creates its context with vm.createContext(sandbox) in its constructor:
    // that one call gets a vanilla context instead.
    const createContext = vm.createContext;
    let calls = 0;
    if (vm.constants?.DONT_CONTEXTIFY !== undefined) {
      vm.createContext = () => {
        calls++;
        return createContext(vm.constants.DONT_CONTEXTIFY);
      };
    }
    try {
      super(config, context);
    } finally {
      vm.createContext = createContext;
    }
    if (calls > 1)
      throw new Error(
        `jest-environment-node created ${calls} contexts; expected one (see shared/models/onnx/onnx-jest-environment.js)`,
      );
    for (const constructor of typedArrays) this.global[constructor.name] = constructor;
  }
}

module.exports = OnnxJestEnvironment;
