#!/usr/bin/env python3
"""Writes fuzz/corpus/<target>/ seeds from the repository's shipped files: scenarios, sweeps,
a small trace, and the JSON-RPC frames and NIP-01 messages inside it. Run from anywhere; the
seeds are checked in, so run it again only when the shipped files change."""
import json, pathlib, shutil

root = pathlib.Path(__file__).resolve().parent.parent
corpus = root / "fuzz" / "corpus"
shutil.rmtree(corpus, ignore_errors=True)

def put(target, name, text):
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_text(text)

for path in sorted((root / "scenarios").rglob("*.toml")):
    put("scenario_parser", path.relative_to(root).as_posix().replace("/", "_"), path.read_text())
for path in sorted((root / "sweeps").glob("*.toml")):
    put("sweep_parser", path.name, path.read_text())

# The smallest shipped traces: whole, and their frames and messages.
traces = sorted((root / "traces").glob("*.jsonl"), key=lambda p: p.stat().st_size)[:2]
frames, messages = [], []
for trace in traces:
    put("trace_reader", trace.name, trace.read_text())
    for line in trace.read_text().splitlines():
        record = json.loads(line)
        event = record.get("event")
        if record.get("type") != "published" or not event:
            continue
        messages.append(json.dumps(["EVENT", event]))
        frames.append(event["content"])
# CEP-22 frames from a download's trace (its first 80 publications).
download = root / "traces" / "lossy-download.jsonl"
published = [json.loads(l) for l in download.read_text().splitlines()]
published = [r["event"]["content"] for r in published if r.get("type") == "published" and r.get("event")]
frames.extend(published[:80])
messages.insert(0, json.dumps(["REQ", "s", {"kinds": [25910]}]))
for i in range(0, len(frames), 40):
    put("cep22_receiver", f"frames-{i}", "\n".join(frames[i:i + 40]) + "\n")
    put("cep41_registry", f"frames-{i}", "\n".join(frames[i:i + 40]) + "\n")
for i in range(0, len(messages), 20):
    put("nip01_relay", f"messages-{i}", "\n".join(messages[i:i + 20]) + "\n")

put("resumable_messages", "create", json.dumps(
    {"streamId": "s1", "resumeToken": "t", "requestId": 3, "resumeInterval": {"min": 1, "max": 300}}))
put("resumable_messages", "create-draft", json.dumps(
    {"stream": {"streamId": "s1", "resumeInterval": {"min": 1, "max": 300}}}))
put("resumable_messages", "ref", json.dumps({"streamId": "s1", "resumeToken": "t", "lastEventId": "7"}))
