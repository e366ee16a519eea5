// What every hat process does at start-up, done once per jest test file: register the built-in
// model adapters (`openai`, `onnx`, `scripted`), as registerCatalogStages() does for the CLI and workers.
import { registerModelAdapters } from '../workers/register-model-adapters';

registerModelAdapters();
