# Session 9, call 2 (one H200, about 560 s). Root tree = main with fast-sigmoid + conv gather backward merged.
# 1. GPU tier main part on the merged tree (adds test_conv_gpu_gather_bwd_fp32).
# 2. conv anchors, ours-only alternating processes old (0a1d524, dev_scratch/old) / new, 2 rounds (conv_ab.py).
# 3. conv anchors beside fla on the merged tree; 4. rms_norm_gated beside fla, new tree then old tree, while time lasts.
set -u
GPU_ENV_NEEDS="fla, xdist" source scripts/gpu_env.sh
T0=$SECONDS; FINAL=$OUT; W=/tmp/w2; rm -rf $W; mkdir -p $W/t $W/nn $W/no $W/ab $W/cn /tmp/tcache
stamp() { echo "[$((SECONDS-T0)) s] $*"; }
left() { echo $((555 - (SECONDS - T0))); }
export TRITON_CACHE_DIR=/tmp/tcache; tar xzf dev_scratch/autotune.tgz -C /tmp/tcache
cp -r .site dev_scratch/old/ 2>/dev/null
NORMS=(--ops rms_norm_gated --shapes "gdn-b8-t2048;qwen3next" --modes fwd,fwdbwd --providers fla_ascend,fla --timeout 40)
OUT=$W/t PARTS=1 timeout 300 bash scripts/gpu_tier.sh > $W/t/summary.txt 2>&1; stamp "tier rc $?" >> $W/t/summary.txt
echo "command: for i in 1 2; do (cd dev_scratch/old && python3 ../conv_ab.py old); python3 dev_scratch/conv_ab.py new; done" > $W/ab/ab.log
for i in 1 2; do (cd dev_scratch/old && timeout 50 python3 ../conv_ab.py old); timeout 50 python3 dev_scratch/conv_ab.py new; done 2>&1 | grep -v Warn >> $W/ab/ab.log; stamp "ab done" >> $W/ab/ab.log
OUT=$W/cn timeout $(left) bash scripts/gpu_bench.sh --ops causal_conv1d --shapes conv-anchors --modes fwd,fwdbwd --providers fla_ascend,fla --timeout 45 > $W/cn/log.txt 2>&1; stamp "conv new rc $?" >> $W/cn/log.txt
OUT=$W/nn timeout $(left) bash scripts/gpu_bench.sh "${NORMS[@]}" > $W/nn/log.txt 2>&1; stamp "norms new rc $?" >> $W/nn/log.txt
(cd dev_scratch/old && OUT=$W/no timeout $(left) bash scripts/gpu_bench.sh "${NORMS[@]}" > $W/no/log.txt 2>&1); stamp "norms old rc $?" >> $W/no/log.txt
stamp done
tail -12 $W/t/summary.txt
grep -hE "^\[|exit" $W/cn/log.txt $W/nn/log.txt $W/no/log.txt | cut -c1-200
cat $W/ab/ab.log
rm -rf $W/*/parts; (cd $W && tar czf $FINAL/call2.tgz .)
