#!/bin/sh
# The build's layers hold: a module compiled against its include dir (build/layers/<module>)
# cannot include a folder above it. Usage: check_layers.sh CXX LAYERS_DIR
set -u
cxx=$1 layers=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# Control: an include that the layers allow compiles.
printf '#include "comm/wire.h"\n#include "core/error.h"\n' > "$tmp/ok.cpp"
"$cxx" -std=c++20 -fsyntax-only -I"$layers/learner" "$tmp/ok.cpp" || { echo "FAIL: an allowed include did not compile"; exit 1; }
for pair in "learner actor/actor.h" "actor buffer/replay.h" "buffer learner/learner.h" "comm models/policy.h" \
            "actor inference/engine.h" "inference actor/actor.h" "learner inference/server.h" \
            "core comm/wire.h" "envs comm/wire.h" "kernels envs/env.h" "models comm/wire.h" \
            "tracking comm/wire.h" "core tracking/tensorboard.h"; do
  set -- $pair
  printf '#include "%s"\n' "$2" > "$tmp/bad.cpp"
  if out=$("$cxx" -std=c++20 -fsyntax-only -I"$layers/$1" "$tmp/bad.cpp" 2>&1); then
    echo "FAIL: $1/ may include $2"; exit 1
  fi
  # "No such file" from GCC, "file not found" from clang
  echo "$out" | grep -Eq "No such file|file not found" || { echo "FAIL: unexpected error for $1/ including $2: $out"; exit 1; }
  echo "ok: $1/ cannot include $2"
done
