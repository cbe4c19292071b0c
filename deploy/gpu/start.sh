#!/bin/sh
# Serve MODEL with vLLM (its own environment) on 127.0.0.1:8000 and wait until /health answers.
# The API key is VLLM_API_KEY from the environment (a Secret), never an argument.
set -eu
MODEL="${1:?usage: start.sh MODEL [vllm serve options]}"
shift
/opt/vllm/.venv/bin/vllm serve "$MODEL" --host 127.0.0.1 --port 8000 \
  --enable-prefix-caching --download-dir /models "$@" &
pid=$!
until /opt/saber/.venv/bin/python -c "import httpx,sys; sys.exit(httpx.get('http://127.0.0.1:8000/health', timeout=2).status_code != 200)" 2>/dev/null; do
  kill -0 "$pid" 2>/dev/null || { echo "vllm serve exited while loading $MODEL" >&2; wait "$pid"; exit 1; }
  sleep 5
done
echo "vllm ready: $MODEL at http://127.0.0.1:8000/v1"
wait "$pid"
