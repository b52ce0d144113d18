set datafile separator ','
set terminal pngcairo size 900,520 noenhanced
set key outside right
set grid
names = "adaptive static local none"
set xlabel 'decode step'
set output 'recall.png'
set ylabel 'attention recall (50-step mean)'
plot for [i=0:3] 'steps_avg.csv' index i using 1:3 with lines lw 2 title word(names, i + 1)
set output 'kl.png'
set ylabel 'KL(exact || retrieval) (50-step mean)'
plot for [i=0:3] 'steps_avg.csv' index i using 1:4 with lines lw 2 title word(names, i + 1)
set output 'clusters.png'
set ylabel 'clusters'
plot for [i=0:3] 'steps_grouped.csv' index i using 1:5 with lines lw 2 title word(names, i + 1)
set output 'variance.png'
set ylabel 'mean cluster variance'
plot for [i=0:3] 'steps_grouped.csv' index i using 1:6 with lines lw 2 title word(names, i + 1)
set output 'bytes_read.png'
set ylabel 'cumulative bytes read'
plot for [i=0:3] 'steps_cum.csv' index i using 1:7 with lines lw 2 title word(names, i + 1)
set output 'read_ops.png'
set ylabel 'cumulative read operations'
plot for [i=0:3] 'steps_cum.csv' index i using 1:8 with lines lw 2 title word(names, i + 1)
set output 'moved_bytes.png'
set ylabel 'cumulative bytes moved by updates'
plot for [i=0:3] 'steps_cum.csv' index i using 1:11 with lines lw 2 title word(names, i + 1)
set output 'hit_rate.png'
set ylabel 'cache hit rate (50-step mean)'
plot for [i=0:3] 'steps_avg.csv' index i using 1:13 with lines lw 2 title word(names, i + 1)
set output 'io_ms.png'
set ylabel 'I/O ms per step (50-step mean)'
plot for [i=0:3] 'steps_avg.csv' index i using 1:14 with lines lw 2 title word(names, i + 1)
