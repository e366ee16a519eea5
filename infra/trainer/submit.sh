#!/usr/bin/env bash
# Starts the trainer for one training request on a cluster, through the cluster's own tool:
#   bash infra/trainer/submit.sh kubernetes|ray|slurm <requestUri>
# The submission id is the first 16 hex digits of the request's sha256 (read with `hat artifacts
# cat`), so submitting the same request twice starts one training: Kubernetes refuses a second Job
# of the same name, Ray a second job of the same submission id, and for Slurm this script looks for
# a job of the same name first. The trainer writes the checkpoint marker itself (--register-marker).
# Environment: TRAINER_IMAGE (kubernetes), RAY_ADDRESS (ray), HAT_CHECKPOINTS (ray and slurm: a
# directory the workers read), plus what `hat` needs to read the request (HAT_ARTIFACTS, S3_*, AWS_*).
set -euo pipefail
engine="${1:?usage: submit.sh kubernetes|ray|slurm <requestUri>}"
request_uri="${2:?usage: submit.sh kubernetes|ray|slurm <requestUri>}"
here="$(cd "$(dirname "$0")" && pwd)"
hat="${HAT_CLI:-node $here/../../dist/cli/main.js}"
submission_id="$($hat artifacts cat "$request_uri" | sha256sum | cut -c1-16)"
export REQUEST_URI="$request_uri" SUBMISSION_ID="$submission_id"
case "$engine" in
  kubernetes)
    : "${TRAINER_IMAGE:?the trainer image (docker/trainer.Dockerfile)}"
    if kubectl -n hat get job "hat-train-$submission_id" >/dev/null 2>&1; then
      echo "job hat-train-$submission_id exists: this request was submitted already"
    else
      envsubst '${SUBMISSION_ID} ${REQUEST_URI} ${TRAINER_IMAGE}' < "$here/k8s-job.yaml" | kubectl create -f -
    fi
    ;;
  ray)
    : "${HAT_CHECKPOINTS:?a directory the workers read}"
    if ray job status "hat-train-$submission_id" >/dev/null 2>&1; then
      echo "ray job hat-train-$submission_id exists: this request was submitted already"
    else
      ray job submit --submission-id "hat-train-$submission_id" --working-dir "$here/../../trainer" \
        --entrypoint-num-gpus 1 --no-wait -- \
        python -m hat_trainer train --request "$request_uri" --out "$HAT_CHECKPOINTS/$submission_id" \
        --device cuda --register-marker
    fi
    ;;
  slurm)
    : "${HAT_CHECKPOINTS:?a shared directory}"
    if [ -n "$(squeue --noheader --name "hat-train-$submission_id" --format %i)" ] ||
      sacct --noheader --name "hat-train-$submission_id" --state COMPLETED --format JobID | grep -q .; then
      echo "slurm job hat-train-$submission_id exists: this request was submitted already"
    else
      sbatch --job-name "hat-train-$submission_id" --export ALL "$here/train.sbatch"
    fi
    ;;
  *)
    echo "unknown engine $engine: use kubernetes, ray or slurm" >&2
    exit 2
    ;;
esac
