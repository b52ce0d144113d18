#pragma once
// All answer metrics; include the single headers where only one is needed.
#include "metrics/edit_similarity.h"
#include "metrics/label_metrics.h"
#include "metrics/metric_registry.h"
#include "metrics/qa_metrics.h"
#include "metrics/rouge.h"
#include "metrics/text_normalize.h"
#include "metrics/zh_metrics.h"
