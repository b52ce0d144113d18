#include "tasks/longbench_datasets.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "util/error.h"

namespace kvc {

namespace {

// LongBench's config/dataset2prompt.json and dataset2maxlen.json and eval.py's dataset2metric, character
// for character (typos included: users compare scores, and the prompt is part of the score). The tests
// compare this table with the official files kept in data/reference/longbench_config/.
const std::vector<DatasetSpec>& specs() {
  static const std::vector<DatasetSpec> table = {
      {"narrativeqa", Language::English, "qa_f1", 128, false,
       "You are given a story, which can be either a novel or a movie script, and a question. Answer the question "
       "asconcisely as you can, using a single phrase if possible. Do not provide any explanation.\n"
       "\nStory: {context}\n\n"
       "Now, answer the question based on the story asconcisely as you can, using a single phrase if possible. Do not "
       "provide any explanation.\n"
       "\nQuestion: {input}\n\nAnswer:"},
      {"qasper", Language::English, "qa_f1", 128, false,
       "You are given a scientific article and a question. Answer the question as concisely as you can, using a single "
       "phrase or sentence if possible. If the question cannot be answered based on the information in the article, "
       "write \"unanswerable\". If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do "
       "not provide any explanation.\n"
       "\nArticle: {context}\n\n"
       " Answer the question based on the above article as concisely as you can, using a single phrase or sentence if "
       "possible. If the question cannot be answered based on the information in the article, write \"unanswerable\". "
       "If the question is a yes/no question, answer \"yes\", \"no\", or \"unanswerable\". Do not provide any "
       "explanation.\n"
       "\nQuestion: {input}\n\nAnswer:"},
      {"multifieldqa_en", Language::English, "qa_f1", 64, false,
       "Read the following text and answer briefly.\n\n{context}\n\n"
       "Now, answer the following question based on the above text, only give me the answer and do not output any "
       "other words.\n"
       "\nQuestion: {input}\nAnswer:"},
      {"multifieldqa_zh", Language::Chinese, "qa_f1_zh", 64, false,
       "阅读以下文字并用中文简短回答：\n\n{context}"
       "\n\n现在请基于上面的文章回答下面的问题，只告诉我答案，不要输出任何其他字词。\n\n问题：{input}\n回答："},
      {"hotpotqa", Language::English, "qa_f1", 32, false,
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
       "\nThe following are given passages.\n{context}\n\n"
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
       "\nQuestion: {input}\nAnswer:"},
      {"2wikimqa", Language::English, "qa_f1", 32, false,
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
       "\nThe following are given passages.\n{context}\n\n"
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
       "\nQuestion: {input}\nAnswer:"},
      {"musique", Language::English, "qa_f1", 32, false,
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
       "\nThe following are given passages.\n{context}\n\n"
       "Answer the question based on the given passages. Only give me the answer and do not output any other words.\n"
       "\nQuestion: {input}\nAnswer:"},
      {"dureader", Language::Chinese, "rouge_zh", 128, false,
       "请基于给定的文章回答下述问题。\n\n文章：{context}\n\n请基于上述文章回答下面的问题。\n\n问题：{input}\n回答："},
      {"gov_report", Language::English, "rouge_l", 512, false,
       "You are given a report by a government agency. Write a one-page summary of the report.\n\nReport:\n"
       "{context}\n\nNow, write a one-page summary of the report.\n\nSummary:"},
      {"qmsum", Language::English, "rouge_l", 512, false,
       "You are given a meeting transcript and a query containing a question or instruction. Answer the query in one "
       "or more sentences.\n"
       "\nTranscript:\n{context}\n\n"
       "Now, answer the query based on the above meeting transcript in one or more sentences.\n\n"
       "Query: {input}\nAnswer:"},
      {"multi_news", Language::English, "rouge_l", 512, false,
       "You are given several news passages. Write a one-page summary of all news. \n\nNews:\n{context}\n\n"
       "Now, write a one-page summary of all the news.\n\nSummary:"},
      {"vcsum", Language::Chinese, "rouge_zh", 512, false,
       "下面有一段会议记录，请你阅读后，写一段总结，总结会议的内容。\n会议记录：\n{context}\n\n会议总结："},
      {"trec", Language::English, "classification", 64, true,
       "Please determine the type of the question below. Here are some examples of questions.\n\n{context}\n"
       "{input}"},
      {"triviaqa", Language::English, "qa_f1", 32, true,
       "Answer the question based on the given passage. Only give me the answer and do not output any other words. The "
       "following are some examples.\n"
       "\n{context}\n\n{input}"},
      {"samsum", Language::English, "rouge_l", 128, true,
       "Summarize the dialogue into a few short sentences. The following are some examples.\n\n{context}\n\n"
       "{input}"},
      {"lsht", Language::Chinese, "classification", 64, true,
       "请判断给定新闻的类别，下面是一些例子。\n\n{context}\n{input}"},
      {"passage_count", Language::English, "count", 32, false,
       "There are some paragraphs below sourced from Wikipedia. Some of them may be duplicates. Please carefully read "
       "these paragraphs and determine how many unique paragraphs there are after removing duplicates. In other words, "
       "how many non-repeating paragraphs are there in total?\n"
       "\n{context}\n\n"
       "Please enter the final count of unique paragraphs after removing duplicates. The output format should only "
       "contain the number, such as 1, 2, 3, and so on.\n"
       "\nThe final answer is: "},
      {"passage_retrieval_en", Language::English, "retrieval", 32, false,
       "Here are 30 paragraphs from Wikipedia, along with an abstract. Please determine which paragraph the abstract "
       "is from.\n"
       "\n{context}\n\nThe following is an abstract.\n\n{input}\n\n"
       "Please enter the number of the paragraph that the abstract is from. The answer format must be like \"Paragraph "
       "1\", \"Paragraph 2\", etc.\n"
       "\nThe answer is: "},
      {"passage_retrieval_zh", Language::Chinese, "retrieval_zh", 32, false,
       "以下是若干段落文字，以及其中一个段落的摘要。请确定给定的摘要出自哪一段。\n\n{context}\n\n下面是一个摘要\n\n{"
       "input}\n\n"
       "请输入摘要所属段落的编号。答案格式必须是\"段落1\"，\"段落2\"等格式\n\n答案是："},
      {"lcc", Language::Code, "code_sim", 64, false,
       "Please complete the code given below. \n{context}Next line of code:\n"},
      {"repobench-p", Language::Code, "code_sim", 64, false,
       "Please complete the code given below. \n{context}{input}Next line of code:\n"},
  };
  return table;
}

}  // namespace

const std::vector<std::string>& longbench_dataset_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& spec : specs()) out.push_back(spec.name);
    return out;
  }();
  return names;
}

const DatasetSpec& dataset_spec(const std::string& name) {
  const auto& table = specs();
  auto it = std::find_if(table.begin(), table.end(), [&](const DatasetSpec& spec) { return spec.name == name; });
  KVC_CHECK(it != table.end(), "unknown LongBench data set '{}' (known: {})", name,
            fmt::join(longbench_dataset_names(), ", "));
  return *it;
}

}  // namespace kvc
