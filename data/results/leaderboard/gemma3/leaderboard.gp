set terminal pngcairo size 1100,700 noenhanced
set output 'leaderboard.png'
set title 'mean score over needle, niah_single_2, niah_multikey_1 vs cache kept'
set xlabel 'cache kept in RAM vs uncompressed (measured bytes)'
set ylabel 'score'
set xrange [1.02:0]
set yrange [0:1.05]
set key outside right
set grid
plot 'leaderboard.dat' index 0 with linespoints title 'uncompressed', \
     'leaderboard.dat' index 1 with linespoints title 'streaming_llm', \
     'leaderboard.dat' index 2 with linespoints title 'h2o', \
     'leaderboard.dat' index 3 with linespoints title 'tova', \
     'leaderboard.dat' index 4 with linespoints title 'snapkv', \
     'leaderboard.dat' index 5 with linespoints title 'pyramidkv', \
     'leaderboard.dat' index 6 with linespoints title 'knorm', \
     'leaderboard.dat' index 7 with linespoints title 'random', \
     'leaderboard.dat' index 8 with linespoints title 'dynamickv', \
     'leaderboard.dat' index 9 with linespoints title 'd2o', \
     'leaderboard.dat' index 10 with linespoints title 'kvcompose', \
     'leaderboard.dat' index 11 with linespoints title 'kvcompose_unstructured', \
     'leaderboard.dat' index 12 with linespoints title 'ada', \
     'leaderboard.dat' index 13 with linespoints title 'lowrank bases.safetensors:ranks=128', \
     'leaderboard.dat' index 14 with linespoints title 'lowrank bases.safetensors:ranks=77', \
     'leaderboard.dat' index 15 with linespoints title 'lowrank bases.safetensors:ranks=51', \
     'leaderboard.dat' index 16 with linespoints title 'snapkv:heads=shared + lowrank bases.safetensors:ranks=128', \
     'leaderboard.dat' index 17 with linespoints title 'retrieval adaptive:budget=1024', \
     'leaderboard.dat' index 18 with linespoints title 'retrieval static:budget=1024', \
     'leaderboard.dat' index 19 with linespoints title 'retrieval adaptive:budget=256', \
     'leaderboard.dat' index 20 with linespoints title 'cache q8_0', \
     'leaderboard.dat' index 21 with linespoints title 'cache q4_0', \
     'leaderboard.dat' index 22 with linespoints title 'snapkv + cache q8_0', \
     'leaderboard.dat' index 23 with linespoints title 'snapkv + cache q4_0', \
     'leaderboard.dat' index 24 with linespoints title 'lowrank bases.safetensors:share=0.5', \
     'leaderboard.dat' index 25 with linespoints title 'lowrank bases.safetensors:share=0.3', \
     'leaderboard.dat' index 26 with linespoints title 'lowrank bases.safetensors:share=0.2', \
     'leaderboard.dat' index 27 with linespoints title 'lowrank gates.kl.1.safetensors:tau=0.00685', \
     'leaderboard.dat' index 28 with linespoints title 'lowrank gates.kl.4.safetensors:tau=0.00295', \
     'leaderboard.dat' index 29 with linespoints title 'lowrank gates.kl.4.safetensors:tau=0.33432'
