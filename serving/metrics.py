"""Prometheus metrics, served like TF Serving's ``--monitoring_config_file``
(``prometheus_config { enable: true, path: "/monitoring/prometheus/metrics" }``) on the
REST port, in the text exposition format (``model_servers/http_server.cc``,
``util/prometheus_exporter.cc``). Names follow TF Serving's: request counts by model
and status, request latency histograms (microseconds) by model, API and entrypoint,
and model load counts / latency.
"""
import bisect
import threading
from collections import defaultdict

# TF Serving's request latency buckets are exponential in microseconds
_BUCKETS_US = [10 * 1.8 ** i for i in range(33)]


class Metrics:
    def __init__(self):
        self._lock = threading.Lock()
        self.request_count = defaultdict(int)           # (model, status) -> n
        self.http_count = defaultdict(int)              # code -> n
        self.latency = defaultdict(lambda: [0] * (len(_BUCKETS_US) + 1))
        self.latency_sum = defaultdict(float)
        self.load_count = defaultdict(int)              # (model, ok) -> n
        self.load_seconds = defaultdict(float)

    def observe_request(self, model: str, api: str, ok: bool, seconds: float) -> None:
        us = seconds * 1e6
        key = (model, api)
        with self._lock:
            self.request_count[(model, "OK" if ok else "ERROR")] += 1
            self.latency[key][bisect.bisect_left(_BUCKETS_US, us)] += 1
            self.latency_sum[key] += us

    def observe_http(self, code: int) -> None:
        with self._lock:
            self.http_count[int(code)] += 1

    def observe_latency(self, path: str, seconds: float) -> None:
        pass  # per-model latency is recorded by observe_request (the model is known there)

    def observe_load(self, model: str, ok: bool, seconds: float = 0.0) -> None:
        with self._lock:
            self.load_count[(model, ok)] += 1
            self.load_seconds[model] += seconds

    def render(self) -> str:
        out = []
        with self._lock:
            out.append("# TYPE :tensorflow:serving:request_count counter")
            for (model, status), n in sorted(self.request_count.items()):
                out.append(f':tensorflow:serving:request_count{{model_name="{model}",'
                           f'status="{status}"}} {n}')
            out.append("# TYPE :tensorflow:serving:request_latency histogram")
            for (model, api), counts in sorted(self.latency.items()):
                labels = f'model_name="{model}",API="{api}",entrypoint="REST"'
                total = 0
                for bound, c in zip(_BUCKETS_US + [float("inf")], counts):
                    total += c
                    le = "+Inf" if bound == float("inf") else f"{bound:g}"
                    out.append(f":tensorflow:serving:request_latency_bucket{{{labels},"
                               f'le="{le}"}} {total}')
                out.append(f":tensorflow:serving:request_latency_sum{{{labels}}} "
                           f"{self.latency_sum[(model, api)]:g}")
                out.append(f":tensorflow:serving:request_latency_count{{{labels}}} {total}")
            out.append("# TYPE :tensorflow:core:servable_load_count counter")
            for (model, ok), n in sorted(self.load_count.items()):
                out.append(f':tensorflow:core:servable_load_count{{model_name="{model}",'
                           f'status="{"OK" if ok else "ERROR"}"}} {n}')
            out.append("# TYPE :tensorflow:serving:http_response_count counter")
            for code, n in sorted(self.http_count.items()):
                out.append(f':tensorflow:serving:http_response_count{{code="{code}"}} {n}')
        return "\n".join(out) + "\n"
