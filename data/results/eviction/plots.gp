set terminal pngcairo size 900,550 noenhanced
set key outside right
set xlabel 'compression ratio'
set logscale y
set output 'data/results/eviction/kl.png'
set ylabel 'mean KL vs exact (nats)'
set title 'stories260K: mean KL vs exact (nats)'
plot 'data/results/eviction/kl.dat' using 1:2 with linespoints title 'streaming_llm', 'data/results/eviction/kl.dat' using 1:3 with linespoints title 'h2o', 'data/results/eviction/kl.dat' using 1:4 with linespoints title 'tova', 'data/results/eviction/kl.dat' using 1:5 with linespoints title 'snapkv', 'data/results/eviction/kl.dat' using 1:6 with linespoints title 'pyramidkv', 'data/results/eviction/kl.dat' using 1:7 with linespoints title 'knorm', 'data/results/eviction/kl.dat' using 1:8 with linespoints title 'random', 'data/results/eviction/kl.dat' using 1:9 with linespoints title 'dynamickv', 'data/results/eviction/kl.dat' using 1:10 with linespoints title 'd2o', 'data/results/eviction/kl.dat' using 1:11 with linespoints title 'kvcompose', 'data/results/eviction/kl.dat' using 1:12 with linespoints title 'kvcompose_unstructured', 'data/results/eviction/kl.dat' using 1:13 with linespoints title 'ada'
set output 'data/results/eviction/ppl_compressed.png'
set ylabel 'perplexity'
set title 'stories260K: perplexity'
plot 'data/results/eviction/ppl_compressed.dat' using 1:2 with linespoints title 'streaming_llm', 'data/results/eviction/ppl_compressed.dat' using 1:3 with linespoints title 'h2o', 'data/results/eviction/ppl_compressed.dat' using 1:4 with linespoints title 'tova', 'data/results/eviction/ppl_compressed.dat' using 1:5 with linespoints title 'snapkv', 'data/results/eviction/ppl_compressed.dat' using 1:6 with linespoints title 'pyramidkv', 'data/results/eviction/ppl_compressed.dat' using 1:7 with linespoints title 'knorm', 'data/results/eviction/ppl_compressed.dat' using 1:8 with linespoints title 'random', 'data/results/eviction/ppl_compressed.dat' using 1:9 with linespoints title 'dynamickv', 'data/results/eviction/ppl_compressed.dat' using 1:10 with linespoints title 'd2o', 'data/results/eviction/ppl_compressed.dat' using 1:11 with linespoints title 'kvcompose', 'data/results/eviction/ppl_compressed.dat' using 1:12 with linespoints title 'kvcompose_unstructured', 'data/results/eviction/ppl_compressed.dat' using 1:13 with linespoints title 'ada'
