"""A client of the TestService's EmptyCall as Python grpcio's users write
one: a channel whose service config retries RESOURCE_EXHAUSTED (gRFC A6).

    retry_client.py ADDRESS SERVICE_CONFIG SECONDS

Eight threads call back to back for SECONDS, each call with its own
"x-call" metadata; it prints how the calls ended, as JSON, and grpcio's
version on stderr.
"""

import json
import sys
import threading
import time

import grpc


def main():
    address, config, seconds = sys.argv[1], sys.argv[2], float(sys.argv[3])
    channel = grpc.insecure_channel(address, options=[
        ("grpc.enable_retries", 1),
        ("grpc.service_config", config),
    ])
    # grpc.testing.Empty is a message without fields: its encoding is empty.
    call = channel.unary_unary("/grpc.testing.TestService/EmptyCall",
                               request_serializer=None, response_deserializer=None)
    stop = time.monotonic() + seconds
    ended = {}
    lock = threading.Lock()

    def worker(w):
        i = 0
        while time.monotonic() < stop:
            code = "OK"
            try:
                call(b"", metadata=(("x-call", "py%d-%d" % (w, i)),), timeout=30)
            except grpc.RpcError as e:
                code = e.code().name
            with lock:
                ended[code] = ended.get(code, 0) + 1
            i += 1

    threads = [threading.Thread(target=worker, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    channel.close()
    print(json.dumps(ended))
    print(grpc.__version__, file=sys.stderr)


if __name__ == "__main__":
    main()
