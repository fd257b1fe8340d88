"""Simplified and traditional Chinese characters: the pairs that convert one to one.

Used by the ``traditional`` input family and ``agentprop.testing.as_simplified``. Invariant: only
characters with a single traditional form in ordinary use are in the table, so a converted text
converts back to it exactly.
"""

from __future__ import annotations

__all__ = ["to_simplified", "to_traditional"]

_PAIRS = (
    "丢丟个個为為么麼义義于於们們优優体體关關内內写寫删刪别別办辦务務动動劳勞医醫单單变變号號吗嗎喽嘍处處备備头頭夹夾"
    "实實审審对對导導带帶帮幫开開录錄态態户戶执執报報断斷无無时時显顯机機条條来來标標样樣气氣汉漢没沒点點烦煩爱愛状狀"
    "现現电電码碼确確礼禮笔筆紧緊约約级級结結给給绝絕统統续續编編缩縮规規计計订訂认認让讓记記证證诉訴诊診词詞话話询詢"
    "语語诱誘说說请請读讀调調谢謝账賬货貨费費资資赶趕转轉轮輪输輸过過还還这這连連邮郵释釋钱錢销銷错錯键鍵长長问問间間"
    "随隨预預领領题題马馬驾駕帐帳险險赔賠损損坏壞厨廚额額贷貸银銀价價币幣块塊万萬亿億岁歲龄齡门門从從与與产產亲親难難"
    "应應该該经經网網线線车車东東书書买買卖賣图圖华華员員张張权權达達运運进進远遠选選边邊页頁顾顧项項纸紙细細终終组組"
    "织織继繼缴繳贵貴购購贴貼赖賴质質试試阶階际際陆陸饭飯饮飲鱼魚鸡雞龙龍爷爺亚亞兰蘭兴興养養决決况況净淨减減则則刚剛"
    "创創厅廳压壓县縣参參双雙听聽响響国國场場声聲够夠夺奪奖獎妈媽孙孫学學宝寶宽寬寻尋将將层層师師广廣库庫废廢异異弹彈"
    "归歸当當彻徹忆憶怀懷总總惊驚惯慣忧憂战戰扩擴扫掃护護担擔拥擁择擇据據换換数數旧舊晓曉暂暫术術杂雜极極构構档檔桥橋"
    "检檢楼樓欢歡沟溝济濟涨漲热熱灯燈乐樂习習乱亂争爭亏虧众眾传傳伤傷邻鄰铁鐵链鏈锁鎖闭閉闻聞阅閱队隊阳陽顺順顿頓颜顏"
    "风風飞飛饿餓馆館驶駛验驗鲜鮮寿壽虑慮误誤谁誰谈談课課议議讲講许許设設访訪诚誠详詳谓謂诺諾负負责責贝貝财財"
    "赛賽园園围圍团團坚堅宁寧后後发發"
)
_TRADITIONAL = {_PAIRS[i]: _PAIRS[i + 1] for i in range(0, len(_PAIRS), 2)}
_SIMPLIFIED = {t: s for s, t in _TRADITIONAL.items()}
_TO_TRADITIONAL = str.maketrans(_TRADITIONAL)
_TO_SIMPLIFIED = str.maketrans(_SIMPLIFIED)


def to_traditional(text: str) -> str:
    """``text`` with each simplified character of the table in its traditional form."""
    return text.translate(_TO_TRADITIONAL)


def to_simplified(text: str) -> str:
    """``text`` with each traditional character of the table in its simplified form."""
    return text.translate(_TO_SIMPLIFIED)
