"""``python -m tests.stub_llm --port 8089``: the stub on a fixed port, printing each request."""

from __future__ import annotations

import argparse
import signal

from tests.stub_llm.anthropic import model_of
from tests.stub_llm.plans import is_side_request
from tests.stub_llm.server import StubLLM


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Stub Anthropic / OpenAI model API on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8089)
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, signal.default_int_handler)  # SIGTERM stops it cleanly too
    with StubLLM(port=args.port) as stub:
        print(f"stub LLM listening on {stub.base_url} (Ctrl-C to stop)", flush=True)
        seen = 0
        try:
            while True:
                try:
                    requests = stub.wait_for_requests(seen + 1, timeout=60)
                except TimeoutError:
                    continue
                for request in requests[seen:]:
                    print(
                        f"{request.method} {request.target} "
                        f"model={model_of(request.body)!r} messages={len(request.messages)} "
                        f"side={is_side_request(request.body)} "
                        f"last_user={request.last_user_text[-80:]!r}",
                        flush=True,
                    )
                seen = len(requests)
        except KeyboardInterrupt:
            pass


if __name__ == "__main__":
    main()
