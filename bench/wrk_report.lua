-- wrk done() hook: one machine-readable line with exact counts and latency
-- percentiles (microseconds), parsed by bench.py.
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "BENCHJSON {\"requests\":%d,\"bytes\":%d,\"duration_us\":%d," ..
    "\"err_connect\":%d,\"err_read\":%d,\"err_write\":%d,\"err_status\":%d,\"err_timeout\":%d," ..
    "\"p50_us\":%d,\"p99_us\":%d,\"max_us\":%d}\n",
    summary.requests, summary.bytes, summary.duration,
    e.connect, e.read, e.write, e.status, e.timeout,
    latency:percentile(50), latency:percentile(99), latency.max))
end
