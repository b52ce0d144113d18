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
     'leaderboard.dat' index 13 with linespoints title 'adakv', \
     'leaderboard.dat' index 14 with linespoints title 'keydiff', \
     'leaderboard.dat' index 15 with linespoints title 'expected_attention', \
     'leaderboard.dat' index 16 with linespoints title 'lagkv', \
     'leaderboard.dat' index 17 with linespoints title 'leverage', \
     'leaderboard.dat' index 18 with linespoints title 'non_causal_attention', \
     'leaderboard.dat' index 19 with linespoints title 'cur', \
     'leaderboard.dat' index 20 with linespoints title 'compactor', \
     'leaderboard.dat' index 21 with linespoints title 'criticalkv', \
     'leaderboard.dat' index 22 with linespoints title 'criticalkv_ada', \
     'leaderboard.dat' index 23 with linespoints title 'cap', \
     'leaderboard.dat' index 24 with linespoints title 'qfilter', \
     'leaderboard.dat' index 25 with linespoints title 'chunk', \
     'leaderboard.dat' index 26 with linespoints title 'block', \
     'leaderboard.dat' index 27 with linespoints title 'kvzip', \
     'leaderboard.dat' index 28 with linespoints title 'chunkkv', \
     'leaderboard.dat' index 29 with linespoints title 'merging', \
     'leaderboard.dat' index 30 with linespoints title 'think:channels=0.5', \
     'leaderboard.dat' index 31 with linespoints title 'simlayerkv:threshold=0.9', \
     'leaderboard.dat' index 32 with linespoints title 'duo_attention:streaming=0.5', \
     'leaderboard.dat' index 33 with linespoints title 'dms:base=keydiff,threshold=-0.5', \
     'leaderboard.dat' index 34 with linespoints title 'key_rerotation', \
     'leaderboard.dat' index 35 with linespoints title 'finch', \
     'leaderboard.dat' index 36 with linespoints title 'lukv', \
     'leaderboard.dat' index 37 with linespoints title 'roco'
