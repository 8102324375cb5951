#include <iostream>
#include <string>
#include <vector>

#include <ordo/ordo.hpp>

int main() {
  try {
    // $ORDO_MODEL, else the shipped model installed beside the library (share/ordo).
    ordo::Model model = ordo::Model::load_default();
    ordo::TranslatorOptions options;  // plain struct, documented defaults
    options.decoding.beam_size = 4;
    ordo::Translator translator(model, options);  // a bad option: ordo::OptionError
    std::cout << translator.translate("cats chase dogs") << '\n';  // Katzen jagen Hunde

    const std::vector<std::string> lines{"dogs chase cats", "the cat sees a dog"};
    for (const ordo::Translation& t : translator.translate_batch(lines))
      std::cout << (t.ok() ? t.best().text : "error: " + t.error) << '\n';

    const ordo::Score score = translator.score("cats chase dogs", "Katzen jagen Hunde");
    std::cout << "log p = " << score.logprob << '\n';
  } catch (const ordo::Error& e) {  // what went wrong, where, and what to do
    std::cerr << "ordo: " << e.what() << '\n';
    return 1;
  }
}
