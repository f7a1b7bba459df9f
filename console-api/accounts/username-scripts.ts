// A username whose letters mix Latin, Greek and Cyrillic is refused: those scripts share look-alike
// letters (Cyrillic а, е, о, р, с, у, х; Greek ο, ν, ι), so `аdmin` with a Cyrillic а registered beside
// `admin` and read the same in every list and log (a probe found it). The check is Unicode TR39's
// mixed-script idea narrowed to the scripts that are confused in practice: a name in one of them
// alone, or Latin with Han, kana or Hangul (Japanese and Korean names), passes. The case and width
// folding of migration 022 is the other half (`Admin`, `ａｄｍｉｎ`).

const LATIN = /\p{Script=Latin}/u;
const GREEK = /\p{Script=Greek}/u;
const CYRILLIC = /\p{Script=Cyrillic}/u;

/** Whether the name's letters come from more than one of Latin, Greek and Cyrillic. */
export function mixesLookAlikeScripts(name: string): boolean {
  return Number(LATIN.test(name)) + Number(GREEK.test(name)) + Number(CYRILLIC.test(name)) > 1;
}
