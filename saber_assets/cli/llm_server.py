"""`saber llm-server`: the bundled real LLM server on this machine's CPU (llama.cpp's server with
SmolLM2-135M-Instruct), for a build with `configs/local-llm.yaml`.

    saber llm-server --prepare       build the server (once per machine) and find the model
    saber llm-server                 serve chat on :8080 and embeddings on :8081 until Ctrl-C
"""

from __future__ import annotations

import signal
import time


def add_parser(sub) -> None:
    p = sub.add_parser("llm-server", help="serve the bundled model with llama.cpp on this CPU")
    p.add_argument(
        "--prepare",
        action="store_true",
        help="build the server if absent, print its and the model's path, exit",
    )
    p.add_argument("--port", type=int, default=8080, help="chat completions (default 8080)")
    p.add_argument("--embed-port", type=int, default=8081, help="embeddings (default 8081)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--parallel", type=int, default=4, help="requests decoded together")


def run(args) -> int:
    from saber_resources.llama_server import LlamaServer, ServerUnavailable, prepare

    try:
        binary, model = prepare()
    except ServerUnavailable as exc:
        print(f"saber: {exc}")
        return 3
    if args.prepare:
        print(f"server: {binary}\nmodel:  {model}")
        return 0
    chat = LlamaServer(binary, model, port=args.port, threads=args.threads, parallel=args.parallel)
    emb = LlamaServer(binary, model, port=args.embed_port, threads=args.threads, embeddings=True)
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    try:
        with chat, emb:
            print(f"chat:       {chat.url}  (model {chat.alias}; log {chat.log})")
            print(f"embeddings: {emb.url}  (model {emb.alias}; log {emb.log})")
            print("Ctrl-C stops both.", flush=True)
            while not stop and chat.proc and chat.proc.poll() is None:
                time.sleep(0.5)
    except ServerUnavailable as exc:
        print(f"saber: {exc}")
        return 3
    except KeyboardInterrupt:
        pass
    return 0
