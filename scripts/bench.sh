#!/usr/bin/env bash
# The speed figures of the project's goals, measured in one run on this machine, each beside
# its goal as a ratio (measured / goal for "at least" goals, goal / measured for "at most"
# goals: 1.00 or more meets it). About 9 minutes on 2 cores (and 2.6 GiB of memory); run it on an idle machine.
#
#   scripts/bench.sh
#
# Not in CI: timings on shared machines are noise. The numbers belong in notes and the README.
set -euo pipefail
cd "$(dirname "$0")/.."

cargo build --release --quiet --features contextvm-sdk --bins
bin=target/release/relaysim
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

echo "machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo), $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //')"

# 1,000 seeds of the 1 MiB escape-heavy transfer, on every core.
/usr/bin/time -f "%e %U %S %M" -o "$out/time" \
  "$bin" run scenarios/strfry-1mib-escape.toml --runs 1000 --json --out "$out/esc" >"$out/esc.json"
read -r wall user sys rss_kb <"$out/time"
# Relay events as the benches count them: events published to a relay plus copies it delivered.
events=$(python3 -c "import json,sys; c=json.load(open(sys.argv[1]))['counters']; print(c['events_published'] + c.get('delivered', 0))" "$out/esc.json" 2>/dev/null || true)

# A 1 GiB download and a 256 MiB one: peak memory against the payload, and time against size.
/usr/bin/time -f "%e %U %S %M" -o "$out/gib.time" "$bin" run scripts/download-1gib.toml --out "$out/gib" >/dev/null
sed 's/bytes = "1GiB"/bytes = "256MiB"/' scripts/download-1gib.toml >"$out/download-256mib.toml"
/usr/bin/time -f "%e %U %S %M" -o "$out/quarter.time" "$bin" run "$out/download-256mib.toml" --out "$out/quarter" >/dev/null

# A 1 GiB request (an echo) and a 1 GiB upload: peak memory against the payload.
for kind in request upload; do
  sed "s/kind = \"download\"/kind = \"$kind\"/" scripts/download-1gib.toml >"$out/$kind-1gib.toml"
  /usr/bin/time -f "%e %U %S %M" -o "$out/$kind.time" "$bin" run "$out/$kind-1gib.toml" --out "$out/$kind" >/dev/null
done

# The benches print their own tables; keep them for the summary.
cargo bench --quiet --bench world 2>/dev/null >"$out/world.txt"
cargo bench --quiet --bench clients --features contextvm-sdk -- 10000 2>/dev/null >"$out/clients.txt"
cargo bench --quiet --bench vs_sdk --features contextvm-sdk 2>/dev/null >"$out/vs_sdk.txt"

python3 - "$wall" "$user" "$sys" "$rss_kb" "${events:-}" "$out" <<'EOF'
import re, sys
wall, user, sys_s, rss_kb, events, out = sys.argv[1:7]
wall, cpu, rss_mib = float(wall), float(user) + float(sys_s), int(rss_kb) / 1024
rows = []
def row(goal, measured, ratio):
    rows.append((goal, measured, f"{ratio:.2f}"))

row("1,000 seeds of strfry-1mib-escape <= 10 s wall", f"{wall:.1f} s", 10 / wall)
row("... peak memory <= 200 MiB", f"{rss_mib:.0f} MiB", 200 / rss_mib)
if events:
    per = int(events) / cpu
    row(">= 5,000 relay events (published + delivered) per CPU s, ~46 KB events", f"{per:,.0f}", per / 5000)
world = open(f"{out}/world.txt").read()
idle = re.search(r"des idle stream:\s+(\d+)x", world)
if idle:
    row("idle stream >= 80,000x real time", f"{int(idle[1]):,}x", int(idle[1]) / 80000)
# clients  cpu s  relay events  events per cpu s  cost/client
clients = {int(m[1]): (float(m[2]), float(m[3]), float(m[4])) for m in re.finditer(r"^\s*(\d+)\s+([\d.]+)\s+\d+\s+(\d+)\s+([\d.]+)", open(f"{out}/clients.txt").read(), re.M)}
if 100 in clients:
    per = clients[100][1]
    row(">= 20,000 relay events per CPU s, small events (100 clients' echo calls)", f"{per:,.0f}", per / 20000)
if 1000 in clients:
    row("1,000 clients x 10 calls <= 0.5 s CPU", f"{clients[1000][0]:.2f} s", 0.5 / clients[1000][0])
if 10000 in clients:
    import math
    # n log n from 100 to 10,000 clients allows the cost per client to grow 2x.
    growth = clients[10000][2]
    row("cost per client, 100 -> 10,000 clients, <= n log n (2.00)", f"{growth:.2f}", 2.0 / growth)
for m in re.finditer(r"^(cep\S+ .+?)\s+relaysim .* ratio ([\d.]+)x", open(f"{out}/vs_sdk.txt").read(), re.M):
    row(f"{m[1].strip()}: receiver >= 2x contextvm-sdk", f"{float(m[2]):.2f}x", float(m[2]) / 2)
gib = open(f"{out}/gib.time").read().split()
quarter = open(f"{out}/quarter.time").read().split()
gib_cpu, quarter_cpu = float(gib[1]) + float(gib[2]), float(quarter[1]) + float(quarter[2])
gib_rss = int(gib[3]) / (1 << 20)
row("1 GiB download: peak memory <= 2x payload", f"{gib_rss:.2f}x", 2 / gib_rss)
row("... time linear in size (1 GiB / 256 MiB CPU = 4)", f"{gib_cpu / quarter_cpu:.2f}", 4 / (gib_cpu / quarter_cpu))
for kind in ("request", "upload"):
    rss = int(open(f"{out}/{kind}.time").read().split()[3]) / (1 << 20)
    row(f"1 GiB {kind}: peak memory <= 1.5x payload", f"{rss:.2f}x", 1.5 / rss)
width = max(len(r[0]) for r in rows)
print(f"{'goal':<{width}}  {'measured':>12}  ratio")
for goal, measured, ratio in rows:
    print(f"{goal:<{width}}  {measured:>12}  {ratio}")
EOF
