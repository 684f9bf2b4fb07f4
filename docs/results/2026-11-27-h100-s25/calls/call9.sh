#!/usr/bin/env bash
# Session 25, call 9: a fresh daemon's first prefill steps (llama3-8b Q4_0): does the first request of a
# process pay ~100 ms, as the disk overlap's first 64-token step did in call 8? Two fresh daemons.
. bench/device_call_env.sh
mkdir -p /tmp/models
timeout 90 $B/kvtrie-synth --preset llama3-8b --type Q4_0 --threads 14 -o /tmp/models/m.gguf > /dev/null 2>&1
for d in 1 2; do timeout 120 python3 .device/first_steps.py $B /tmp/models/m.gguf | sed "s/^{/{\"daemon\":$d,/" | tee -a $OUT/first_steps.jsonl; cp /tmp/first_steps.log $OUT/daemon_$d.log; done
echo done
