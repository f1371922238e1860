#!/usr/bin/env bash
# Records each contextvm-sdk difference (scenarios/contextvm-sdk/) as a trace, one run, events by
# id, then shrinks it to the disturbances that still cause the SDK side's failure.
# Run from the repository root: bash traces/contextvm-sdk/regenerate.sh
set -euo pipefail
cargo build --release --quiet --features contextvm-sdk
for pair in reordered-stream:stream-sequence reordered-download:download-reassembly ts-server-stateless-upload:timeout \
    stream-reader-reorder:stream-sequence ts-client-upload-no-accept-wait:timeout \
    writer-ping-overtakes-chunk:stream-sequence lost-ping:stream-aborted-by-peer \
    rust-client-ts-server-long-stream:timeout; do
  name=${pair%%:*}
  cause=${pair##*:}
  ./target/release/relaysim run "scenarios/contextvm-sdk/$name.toml" --runs 1 --trace-events ids \
    --trace "traces/contextvm-sdk/$name.jsonl" --out "/tmp/relaysim-regenerate/$name" > /dev/null || true
  ./target/release/relaysim shrink "traces/contextvm-sdk/$name.jsonl" --cause "$cause" \
    --out "traces/contextvm-sdk/$name.shrunk.jsonl"
done
