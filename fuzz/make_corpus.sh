#!/usr/bin/env bash
# Regenerates the seed inputs of fuzz/corpus/. Kept: the regression-* inputs (each once found a
# bug) and generated/ (a minimized corpus of earlier fuzzing runs). Needs a built gradlab
# (build/gradlab, or the path given as the first argument), h5repack (Debian hdf5-tools) and
# h5py for /usr/bin/python3 (python3-h5py).
#
#   fuzz/make_corpus.sh [path/to/gradlab]
#
# Checkpoint seeds (fuzz/corpus/checkpoint/): valid checkpoints of tiny models (decoder with
# Adam, seq2seq with SGD momentum), the same edited the way other tools could (a
# variable-length string, chunked and compressed tensors, float64 tensors), and damaged or
# foreign files (truncated, wrong version, soft link, no gradlab format, not HDF5, empty), and
# the damaged storage and values listed below.
# Command-line seeds (fuzz/corpus/cli/): one argument word per line, first the subcommand.
# Intervention seeds (fuzz/corpus/intervene/): one --intervene spec per file.
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
gradlab="$(realpath "${1:-$repo_root/build/gradlab}")"
out="$repo_root/fuzz/corpus"
mkdir -p "$out/checkpoint" "$out/cli"
find "$out" -type f ! -name 'regression-*' ! -path '*/generated/*' -delete
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
cd "$work"

tiny=(--length 1 --symbols 2 --d-model 4 --heads 1 --layers 1 --d-ff 4 --batch-size 1
  --eval-size 1 --steps 1 --eval-every 1 --target-accuracy 0)
"$gradlab" train "${tiny[@]}" --out decoder >/dev/null
"$gradlab" train "${tiny[@]}" --model seq2seq --optimizer sgd --momentum 0.9 --out seq2seq \
  >/dev/null
# A character-level language model: its /config holds the text's vocabulary (a string with a
# newline in it), which every reader checks.
for _ in $(seq 40); do printf 'the cat sat.\n'; done >text.txt
"$gradlab" train --task text --data text.txt --context 4 --d-model 4 --heads 1 --layers 1 \
  --d-ff 4 --batch-size 1 --eval-iters 1 --steps 1 --eval-every 1 --out text >/dev/null
ck="$out/checkpoint"
cp decoder/step-000001.h5 "$ck/valid-decoder-adam.h5"
cp text/step-000001.h5 "$ck/valid-text-char.h5"
cp seq2seq/step-000001.h5 "$ck/valid-seq2seq-sgd-momentum.h5"
h5repack -l /model/head.weight,/model/head.bias:CHUNK=2 \
  -f /model/head.weight,/model/head.bias:GZIP=1 decoder/step-000001.h5 "$ck/valid-chunked-gzip.h5"
head -c "$(($(stat -c %s decoder/step-000001.h5) / 2))" decoder/step-000001.h5 \
  >"$ck/truncated-half.h5"
head -c 48 decoder/step-000001.h5 >"$ck/truncated-superblock.h5"
printf 'not an HDF5 file\n' >"$ck/not-hdf5.txt"
: >"$ck/empty"

edit() {  # edit <name> <python statements using f, the opened copy>
  cp decoder/step-000001.h5 "$ck/$1"
  /usr/bin/python3 - "$ck/$1" "$2" <<'EOF'
import sys

import h5py
import numpy as np

with h5py.File(sys.argv[1], "r+") as f:
    exec(sys.argv[2])
EOF
}
edit valid-vlen-string.h5 'f["config"].attrs["task"] = "copy"'
edit valid-float64.h5 '
for name in list(f["model"]):
    data = f["model"][name][()].astype(np.float64)
    del f["model"][name]
    f["model"].create_dataset(name, data=data)'
edit wrong-version.h5 'f.attrs["version"] = np.int64(7)'
edit soft-link.h5 '
name = list(f["model"])[0]
del f["model"][name]
f["model"][name] = h5py.SoftLink("/train")'
/usr/bin/python3 -c '
import sys, h5py
with h5py.File(sys.argv[1], "w") as f:
    f["x"] = [1.0, 2.0]
' "$ck/foreign.h5"

# The bad-input classes of the checkpoint reader's tests (tests/train/io/test_checkpoint_errors.cpp):
# the HDF5 signature alone, declared but unwritten or short chunks, a compressed chunk claiming
# more than deflate can hold, and a flipped byte inside a tensor's values (its checksum fails).
printf '\211HDF\r\n\032\n' >"$ck/signature-only"
edit unwritten-chunked-2p28.h5 '
f["model"].create_dataset("huge", shape=(16384, 16384), dtype="<f4", chunks=(1024, 1024),
                          compression="gzip")'
edit short-chunk.h5 '
d = f["model"].create_dataset("short", shape=(4,), dtype="<f4", chunks=(4,))
d.id.write_direct_chunk((0,), bytes(8))'
edit deflate-bomb.h5 '
d = f["model"].create_dataset("bomb", shape=(1 << 20,), dtype="<f4", chunks=(1 << 20,),
                              compression="gzip")
d.id.write_direct_chunk((0,), bytes(8))'
cp decoder/step-000001.h5 "$ck/flipped-value-byte.h5"
/usr/bin/python3 - "$ck/flipped-value-byte.h5" <<'EOF'
import sys

import h5py

with h5py.File(sys.argv[1], "r") as f:
    values = f["model"]["head.weight"][()].tobytes()
with open(sys.argv[1], "r+b") as out:
    data = bytearray(out.read())
    at = data.find(values)
    assert at >= 0, "head.weight's values not found"
    data[at + 1] ^= 0x10
    out.seek(0)
    out.write(data)
EOF

cli="$out/cli"
line() {  # line <name> <words...>: one word per line
  local name="$1"
  shift
  printf '%s\n' "$@" >"$cli/$name"
}
# Every command of the table, as `gradlab --help` lists them: its --help.
for command in $("$gradlab" --help | sed -n '/^commands:/,$p' | awk 'NR > 1 && NF {print $1}'); do
  line "$command-help" "$command" --help
done
line train-tiny train "${tiny[@]}" --out run
line train-all-flags train --task recall --length 3 --symbols 5 --model seq2seq --d-model 16 \
  --heads 4 --kv-heads 2 --layers 2 --d-ff 32 --dropout 0.1 --pre-norm false \
  --learned-positions true --optimizer adamw --lr 0.001 --beta1 0.9 --beta2 0.98 --eps 1e-9 \
  --weight-decay 0.01 --momentum 0 --nesterov false --schedule cosine --warmup 10 \
  --min-lr 0.0001 --batch-size 8 --steps 100 --clip 1 --eval-every 10 --eval-size 16 \
  --target-accuracy 0.5 --seed 3 --threads 1 --save-every 5 --keep 2 --out run
line train-config train --config run.ini --steps 7
line train-resume train --resume ck.h5 --steps 9 --save-every 2
line train-resume-changed train --resume ck.h5 --d-model 16
line train-resume-bad train --resume bad.h5
line train-bad-value train --steps -5
line eval eval --checkpoint ck.h5 --threads 2
line predict predict --checkpoint ck.h5 --input "1 2"
line hooks hooks --checkpoint ck.h5
line attention attention --checkpoint ck.h5 --input "1 2" --out w.h5
line ablate ablate --checkpoint ck.h5 --mode mean --out a.csv --overwrite
line ablate-together ablate --checkpoint ck.h5 --together 'blocks.1.attn:*' blocks.0.attn:0,1 \
  blocks.0.ffn
line patch patch --checkpoint ck.h5 --clean "1 2" --corrupt "2 1" --names '*hook_z' \
  --per-position --out p.h5
line heads heads --checkpoint ck.h5 --length 2 --sequences 2 --out w.h5
line circuits circuits --checkpoint ck.h5 --layer 1 --head 0 --top 2 --baseline-draws 2 --out c.h5
line lens lens --checkpoint ck.h5 --input "1 2" --top 2 --out l.h5
line dla dla --checkpoint ck.h5 --held-out 2 --versus 1 --out d.h5
line fourier fourier --checkpoint ck.h5 --share 0.5 --neuron-threshold 0.9 --out f.csv
line fourier-run fourier --run run --out f.csv --overwrite
line inspect inspect ck.h5
line superposition superposition --checkpoint ck.h5 --out s.csv --overwrite
line explain explain
line explain-shapes explain --shapes 2,5,8,4,2
line gradcheck gradcheck --op relu --seed 3
line report report run --out r.html --input "1 2" --threads 1
# Bad input of every class the command line refuses (tests/cli/test_bad_inputs.cpp): threads above
# the cap, sizes too large for a tensor, special files (a FIFO would hang if opened), stray
# arguments, empty values, negative seeds, non-finite numbers, a long value quoted by a prefix.
line train-threads-huge train --threads 100000
line eval-threads-huge eval --checkpoint ck.h5 --threads 2147483648
line sample-threads-huge sample --checkpoint ck.h5 --threads 100000
line train-length-large train --length 100000
line train-symbols-large train --symbols 1000000
line train-scores-large train --length 4096
line train-eval-size-large train --eval-size 1000000000
line explain-shapes-large explain --shapes 1,1,16384,1
line train-config-fifo train --config fifo
line train-config-dir train --config dir
line train-data-fifo train --task text --data fifo
line train-resume-fifo train --resume fifo
line eval-checkpoint-fifo eval --checkpoint fifo
line eval-checkpoint-dir eval --checkpoint dir
line inspect-fifo inspect fifo
line sample-fifo sample --checkpoint fifo
line train-positional train extra
line explain-positional explain -- --shapes
line inspect-positionals inspect ck.h5 extra
line train-empty-resume train --resume ""
line train-empty-config train --config ""
line train-empty-out train --out ""
line predict-empty-input predict --checkpoint ck.h5 --input ""
line train-seed-negative train --seed -1
line gradcheck-seed-negative gradcheck --seed=-1
line train-clip-inf train --clip inf
line train-lr-nan train --lr nan
line train-long-task train --task "$(printf 'x%.0s' {1..300})"
# The input classes of tests/cli/test_input_rules.cpp: the sample command's flags, non-finite
# numbers of other commands, special files as --data, --data on a toy task's checkpoint, an
# option of another task (a flag, a config-file line), impossible task sizes, an empty or
# ambiguous option.
line sample sample --checkpoint ck.h5 --prompt "a b" --tokens 3 --temperature 0.5 --top-k 2 \
  --seed 4 --no-cache --threads 1
line sample-temperature-inf sample --checkpoint ck.h5 --temperature inf
line sample-temperature-nan sample --checkpoint ck.h5 --temperature nan
line sample-temperature-negative sample --checkpoint ck.h5 --temperature -0.5
line activations-max-memory-inf activations --checkpoint ck.h5 --input "1 2" --out a.h5 \
  --max-memory inf
line eval-data-dir eval --checkpoint ck.h5 --data dir
line eval-data-fifo eval --checkpoint ck.h5 --data fifo
line ablate-data-fifo ablate --checkpoint ck.h5 --data fifo
line train-data-without-text train --data run.ini
line train-modulus-on-copy train --modulus 7
line train-tokenizer-on-modular train --task modular --tokenizer byte
line train-modulus-one train --task modular --modulus 1
line train-fraction-one train --task modular --train-fraction 1
line train-mqar-pairs-large train --task mqar --pairs 40 --context 64
line train-empty-argument train ""
line train-ambiguous train --e 1
line sweep sweep --grid lr=1e-3,3e-3 --seeds 2 --jobs 2 "${tiny[@]}" --out sw
line sweep-grid-bad sweep --grid lr=1e-3,, --grid = --out sw
line sweep-config sweep --config run.ini --grid seed=1 --out sw

# --intervene specs (fuzz_intervene.cpp's working directory: a.h5, bad.h5, dir): every kind, a
# head, a glob and a parameter, then the hostile specs: missing parts, unknown forms, huge and
# non-numeric heads, trailing garbage, NaN, huge, empty and scalar arrays, files of every kind.
iv="$out/intervene"
mkdir -p "$iv"
spec() { printf '%s' "$2" >"$iv/$1"; }
spec zero 'blocks.0.hook_resid_pre=zero'
spec head-mean 'blocks.0.attn.hook_z:1=mean'
spec glob-resample 'blocks.*.hook_resid_post=resample'
spec keep 'blocks.1.hook_resid_pre=keep:a.h5#m'
spec project-out-group 'blocks.0.hook_resid_mid=project-out:a.h5#g/inner'
spec value 'blocks.0.hook_resid_pre=value:a.h5#v'
spec value-head 'blocks.1.attn.hook_z:0=value:a.h5#h'
spec parameter 'embed.token_embedding.weight=value:a.h5#w'
spec parameter-wrong-shape 'embed.position_embedding.weight=value:a.h5#m'
spec value-nan 'blocks.0.hook_resid_pre=value:a.h5#nan'
spec keep-nan 'blocks.0.hook_resid_pre=keep:a.h5#nan'
spec value-huge 'blocks.0.hook_resid_pre=value:a.h5#huge'
spec keep-empty 'blocks.0.hook_resid_pre=keep:a.h5#empty'
spec keep-scalar 'blocks.0.hook_resid_pre=keep:a.h5#scalar'
spec not-hdf5 'blocks.0.hook_resid_pre=keep:bad.h5#m'
spec directory 'blocks.0.hook_resid_pre=keep:dir#m'
spec no-file 'blocks.0.hook_resid_pre=keep:none.h5#m'
spec no-dataset 'blocks.0.hook_resid_pre=value:a.h5#'
spec empty ''
spec equals-only '='
spec no-equals 'blocks.0.hook_resid_pre'
spec no-point '=zero'
spec unknown-kind 'blocks.0.hook_resid_pre=halve'
spec trailing-garbage 'blocks.0.hook_resid_pre=zero junk'
spec argument-to-zero 'blocks.0.hook_resid_pre=zero:1'
spec head-huge 'blocks.0.attn.hook_z:99999999999999999999=zero'
spec head-nan 'blocks.0.attn.hook_z:nan=zero'
spec head-past 'blocks.0.attn.hook_z:2=zero'
spec head-without-axis 'blocks.0.hook_resid_pre:0=zero'
spec unknown-point 'blocks.9.hook_resid_pre=zero'
spec two-equals 'blocks.0.hook_resid_pre=zero=mean'
printf 'blocks.0.hook_resid_pre=keep:a.h5\0x#m' >"$iv/nul-in-file"
printf 'blocks.0.hook_\nresid_pre=zero' >"$iv/newline"

echo "fuzz corpus: $(find "$ck" -type f | wc -l) checkpoint inputs, $(find "$cli" -type f | wc -l)" \
  "command lines, $(find "$iv" -type f | wc -l) intervention specs in $out"
