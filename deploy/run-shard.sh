#!/usr/bin/env sh
# One shard of a sweep, as a batch engine's array task runs it.
#   run-shard.sh SWEEP INDEX COUNT OUT
# runs the cells with index % COUNT == INDEX and writes OUT/shard-INDEX/sweep.csv. Every batch
# definition in this folder calls it with its engine's task index; merge-shards.sh joins them.
# A cell's result depends only on its parameters and seeds, so the merged result is
# byte-identical to one `relaysim sweep SWEEP` (tests/it/sweep.rs runs this script to check).
set -eu
if [ "$#" -ne 4 ]; then
  echo "usage: $0 SWEEP INDEX COUNT OUT" >&2
  exit 2
fi
exec "${RELAYSIM:-relaysim}" sweep "$1" --shard "$2/$3" --out "$4/shard-$2"
