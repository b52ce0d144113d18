set terminal pngcairo size 900,550 noenhanced
set key outside right
set xlabel 'compression ratio'
set logscale y
set output 'data/results/eviction/d2o_ablation/kl.png'
set ylabel 'mean KL vs exact (nats)'
set title 'stories260K: mean KL vs exact (nats)'
plot 'data/results/eviction/d2o_ablation/kl.dat' using 1:2 with linespoints title 'h2o', 'data/results/eviction/d2o_ablation/kl.dat' using 1:3 with linespoints title 'd2o', 'data/results/eviction/d2o_ablation/kl.dat' using 1:4 with linespoints title 'd2o:merge=0', 'data/results/eviction/d2o_ablation/kl.dat' using 1:5 with linespoints title 'd2o:layers=uniform', 'data/results/eviction/d2o_ablation/kl.dat' using 1:6 with linespoints title 'd2o:merge=0,layers=uniform', 'data/results/eviction/d2o_ablation/kl.dat' using 1:7 with linespoints title 'd2o:recent=0.5', 'data/results/eviction/d2o_ablation/kl.dat' using 1:8 with linespoints title 'd2o:recent=0.5,merge=0,layers=uniform', 'data/results/eviction/d2o_ablation/kl.dat' using 1:9 with linespoints title 'h2o:recent=0.25'
set output 'data/results/eviction/d2o_ablation/ppl_compressed.png'
set ylabel 'perplexity'
set title 'stories260K: perplexity'
plot 'data/results/eviction/d2o_ablation/ppl_compressed.dat' using 1:2 with linespoints title 'h2o', 'data/results/eviction/d2o_ablation/ppl_compressed.dat' using 1:3 with linespoints title 'd2o', 'data/results/eviction/d2o_ablation/ppl_compressed.dat' using 1:4 with linespoints title 'd2o:merge=0', 'data/results/eviction/d2o_ablation/ppl_compressed.dat' using 1:5 with linespoints title 'd2o:layers=uniform', 'data/results/eviction/d2o_ablation/ppl_compressed.dat' using 1:6 with linespoints title 'd2o:merge=0,layers=uniform', 'data/results/eviction/d2o_ablation/ppl_compressed.dat' using 1:7 with linespoints title 'd2o:recent=0.5', 'data/results/eviction/d2o_ablation/ppl_compressed.dat' using 1:8 with linespoints title 'd2o:recent=0.5,merge=0,layers=uniform', 'data/results/eviction/d2o_ablation/ppl_compressed.dat' using 1:9 with linespoints title 'h2o:recent=0.25'
