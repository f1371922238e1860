#!/usr/bin/env bash
# Records every trace in traces/ from its scenario in traces/src/, then shrinks it.
# Run from the repository root: bash traces/regenerate.sh
set -euo pipefail
cargo build --release --quiet
for src in traces/src/*.toml; do
  name=$(basename "$src" .toml)
  ./target/release/relaysim run "$src" --runs 1 --trace "traces/$name.jsonl" --out "/tmp/relaysim-regenerate/$name" > /dev/null || true
  ./target/release/relaysim shrink "traces/$name.jsonl" --out "traces/$name.shrunk.jsonl"
done
