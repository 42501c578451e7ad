-- wrk: print the 99.9th percentile too (wrk's --latency stops at 99%).
done = function(summary, latency, requests)
  io.write(string.format("p999_us %d\n", latency:percentile(99.9)))
end
