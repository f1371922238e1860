#!/usr/bin/env sh
# Joins the shards run-shard.sh wrote into one result: sweep.csv, plots, recommendation.
#   merge-shards.sh SWEEP COUNT OUT RESULT
# refuses to merge unless all COUNT shards are there (a lost task must be rerun, not skipped).
set -eu
if [ "$#" -ne 4 ]; then
  echo "usage: $0 SWEEP COUNT OUT RESULT" >&2
  exit 2
fi
sweep="$1"; count="$2"; out="$3"; result="$4"
set --
i=0
while [ "$i" -lt "$count" ]; do
  csv="$out/shard-$i/sweep.csv"
  if [ ! -f "$csv" ]; then
    echo "shard $i of $count is missing ($csv): rerun it with run-shard.sh" >&2
    exit 1
  fi
  set -- "$@" "$csv"
  i=$((i + 1))
done
exec "${RELAYSIM:-relaysim}" merge "$sweep" "$@" --out "$result"
