/** Imported first by tests that compare stage outputs byte for byte: manifests record the code version, which would otherwise include the git commit. */
process.env.HAT_CODE_VERSION = 'golden';
